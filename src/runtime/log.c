/* etch_logf: a formatted line through the platform's log hook (etch/platform.h). */
#include <stdarg.h>
#include <stdio.h>

#include "etch/platform.h"

void etch_logf(etch_log_level level, const char *fmt, ...) {
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt ? fmt : "", ap);
    va_end(ap);
    etch_platform_log(level, line);
}
