/* The cold half of the byte cursor (cursor.h): its messages. */
#include <stdarg.h>
#include <stdio.h>
#include "cursor.h"

void perfev_cursor_fail(const struct perfev_cursor *c, const char *fmt, ...)
{
  char msg[200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  c->fail(c, msg);
  __builtin_unreachable();   /* fail raises a Lua error */
}

void perfev_cursor_overrun(const struct perfev_cursor *c, size_t n, const char *what)
{
  perfev_cursor_fail(c, "%s needs %zu bytes at record offset %zu, %zu left",
                     what ? what : "padding", n, (size_t)(c->p - c->rec), perfev_cursor_left(c));
}
