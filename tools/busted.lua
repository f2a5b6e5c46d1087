-- Runs busted's command-line runner under whichever interpreter runs this
-- file: `lua5.4 tools/busted.lua ...`, also under valgrind. Same as the
-- `busted` script Debian ships, without depending on its #! line.
require 'busted.runner'({ standalone = false })
