/* snprintf / vsnprintf for the firmware, in place of the C library's: newlib-nano's lack %zu and
 * %ll, which etch's error messages use for sizes and offsets, and newlib's full ones bring
 * stdio streams and about 27 KiB. Linked before libc, these definitions are the ones used.
 *
 * Conversions: d i u x X o c s p % with flags - 0 + space, width and precision (also *), the
 * length modifiers hh h l ll z j t; e f g (and E F G) print through a short decimal routine that
 * is exact to about 9 significant digits (enough for messages; no output of etch's depends on
 * it). n is not supported (prints nothing). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct sink {
    char *buf;
    size_t cap, len;
} sink;

static void out_c(sink *s, char c) {
    if (s->len + 1 < s->cap)
        s->buf[s->len] = c;
    s->len++;
}

static void out_pad(sink *s, char c, int n) {
    while (n-- > 0)
        out_c(s, c);
}

/* digits of v in base (lowercase unless upper), reversed into t; returns the count */
static int utoa_rev(char *t, uint64_t v, unsigned base, int upper) {
    const char *dig = upper ? "0123456789ABCDEF" : "0123456789abcdef";
    int n = 0;
    do {
        t[n++] = dig[v % base];
        v /= base;
    } while (v);
    return n;
}

static void out_number(sink *s, uint64_t v, int neg, unsigned base, int upper, int left,
                       int zero, char sign_c, int width, int prec) {
    char t[24];
    int n = (prec == 0 && v == 0) ? 0 : utoa_rev(t, v, base, upper);
    int zeros = prec > n ? prec - n : 0;
    char sign = neg ? '-' : sign_c;
    int total = n + zeros + (sign ? 1 : 0);
    if (!left && !(zero && prec < 0))
        out_pad(s, ' ', width - total);
    if (sign)
        out_c(s, sign);
    if (!left && zero && prec < 0)
        out_pad(s, '0', width - total);
    out_pad(s, '0', zeros);
    while (n)
        out_c(s, t[--n]);
    if (left)
        out_pad(s, ' ', width - total);
}

/* %e / %f / %g, approximately (messages only) */
static void out_double(sink *s, double d, char conv, int prec, int width, int left) {
    char t[64];
    size_t n = 0;
    if (prec < 0)
        prec = 6;
    if (d != d) {
        memcpy(t, "nan", 3);
        n = 3;
    } else {
        if (d < 0) {
            t[n++] = '-';
            d = -d;
        }
        if (d > 1.7976931348623157e308) {
            memcpy(t + n, "inf", 3);
            n += 3;
        } else {
            int exp10 = 0;
            double m = d;
            while (m >= 10.0) {
                m /= 10.0;
                exp10++;
            }
            while (m > 0 && m < 1.0) {
                m *= 10.0;
                exp10--;
            }
            char c = (char)(conv | 0x20);
            int use_e = c == 'e';
            if (c == 'g') {
                if (prec == 0)
                    prec = 1;
                use_e = exp10 < -4 || exp10 >= prec;
                prec = use_e ? prec - 1 : prec - 1 - exp10;
                if (prec < 0)
                    prec = 0;
            }
            if (prec > 15)
                prec = 15;
            double scale = 1.0;
            for (int k = 0; k < prec; k++)
                scale *= 10.0;
            double v = use_e ? m : d;
            uint64_t whole = (uint64_t)v;
            uint64_t frac = (uint64_t)((v - (double)whole) * scale + 0.5);
            if ((double)frac >= scale) {
                whole++;
                frac = 0;
                if (use_e && whole >= 10) {
                    whole = 1;
                    exp10++;
                }
            }
            char r[24];
            int k = utoa_rev(r, whole, 10, 0);
            while (k && n < sizeof t - 8)
                t[n++] = r[--k];
            if (prec > 0) {
                char fr[24];
                int fk = utoa_rev(fr, frac, 10, 0);
                int last = prec; /* %g drops trailing zeros */
                char digits[24];
                for (int z = 0; z < prec - fk; z++)
                    digits[z] = '0';
                for (int z = 0; z < fk; z++)
                    digits[prec - 1 - z] = fr[z];
                if (c == 'g')
                    while (last > 0 && digits[last - 1] == '0')
                        last--;
                if (last > 0) {
                    t[n++] = '.';
                    for (int z = 0; z < last && n < sizeof t - 6; z++)
                        t[n++] = digits[z];
                }
            }
            if (use_e) {
                t[n++] = 'e';
                t[n++] = exp10 < 0 ? '-' : '+';
                int ae = exp10 < 0 ? -exp10 : exp10;
                if (ae < 10)
                    t[n++] = '0';
                k = utoa_rev(r, (uint64_t)ae, 10, 0);
                while (k)
                    t[n++] = r[--k];
            }
        }
    }
    if (!left)
        out_pad(s, ' ', width - (int)n);
    for (size_t k = 0; k < n; k++)
        out_c(s, t[k]);
    if (left)
        out_pad(s, ' ', width - (int)n);
}

int vsnprintf(char *restrict buf, size_t cap, const char *restrict fmt, va_list ap) {
    sink s = {buf, cap, 0};
    for (const char *p = fmt; *p; p++) {
        if (*p != '%') {
            out_c(&s, *p);
            continue;
        }
        int left = 0, zero = 0, width = 0, prec = -1;
        char sign_c = 0;
        for (;; p++) {
            if (p[1] == '-')
                left = 1;
            else if (p[1] == '0')
                zero = 1;
            else if (p[1] == '+')
                sign_c = '+';
            else if (p[1] == ' ')
                sign_c = sign_c ? sign_c : ' ';
            else if (p[1] == '#')
                ;
            else
                break;
        }
        p++;
        if (*p == '*') {
            width = va_arg(ap, int);
            if (width < 0) {
                left = 1;
                width = -width;
            }
            p++;
        } else {
            while (*p >= '0' && *p <= '9')
                width = width * 10 + (*p++ - '0');
        }
        if (*p == '.') {
            p++;
            prec = 0;
            if (*p == '*') {
                prec = va_arg(ap, int);
                p++;
            } else {
                while (*p >= '0' && *p <= '9')
                    prec = prec * 10 + (*p++ - '0');
            }
        }
        int len = 0; /* 1 l, 2 ll, 3 z, 4 j, 5 t, -1 h, -2 hh */
        if (*p == 'h') {
            len = -1;
            if (*++p == 'h') {
                len = -2;
                p++;
            }
        } else if (*p == 'l') {
            len = 1;
            if (*++p == 'l') {
                len = 2;
                p++;
            }
        } else if (*p == 'z') {
            len = 3;
            p++;
        } else if (*p == 'j') {
            len = 4;
            p++;
        } else if (*p == 't') {
            len = 5;
            p++;
        } else if (*p == 'L') {
            p++;
        }
        char c = *p;
        if (!c)
            break;
        switch (c) {
        case 'd':
        case 'i': {
            int64_t v;
            switch (len) {
            case 1: v = va_arg(ap, long); break;
            case 2: v = va_arg(ap, long long); break;
            case 3: v = (int64_t)va_arg(ap, size_t); break;
            case 4: v = va_arg(ap, intmax_t); break;
            case 5: v = va_arg(ap, ptrdiff_t); break;
            case -1: v = (short)va_arg(ap, int); break;
            case -2: v = (signed char)va_arg(ap, int); break;
            default: v = va_arg(ap, int);
            }
            uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
            out_number(&s, u, v < 0, 10, 0, left, zero, sign_c, width, prec);
            break;
        }
        case 'u':
        case 'x':
        case 'X':
        case 'o': {
            uint64_t v;
            switch (len) {
            case 1: v = va_arg(ap, unsigned long); break;
            case 2: v = va_arg(ap, unsigned long long); break;
            case 3: v = va_arg(ap, size_t); break;
            case 4: v = va_arg(ap, uintmax_t); break;
            case 5: v = (uint64_t)va_arg(ap, ptrdiff_t); break;
            case -1: v = (unsigned short)va_arg(ap, unsigned); break;
            case -2: v = (unsigned char)va_arg(ap, unsigned); break;
            default: v = va_arg(ap, unsigned);
            }
            unsigned base = c == 'u' ? 10 : c == 'o' ? 8 : 16;
            out_number(&s, v, 0, base, c == 'X', left, zero, 0, width, prec);
            break;
        }
        case 'p':
            out_c(&s, '0');
            out_c(&s, 'x');
            out_number(&s, (uint64_t)(uintptr_t)va_arg(ap, void *), 0, 16, 0, left, 0, 0,
                       width > 2 ? width - 2 : 0, -1);
            break;
        case 'c': {
            char ch = (char)va_arg(ap, int);
            if (!left)
                out_pad(&s, ' ', width - 1);
            out_c(&s, ch);
            if (left)
                out_pad(&s, ' ', width - 1);
            break;
        }
        case 's': {
            const char *str = va_arg(ap, const char *);
            if (!str)
                str = "(null)";
            size_t n = 0;
            while (str[n] && (prec < 0 || n < (size_t)prec))
                n++;
            if (!left)
                out_pad(&s, ' ', width - (int)n);
            for (size_t k = 0; k < n; k++)
                out_c(&s, str[k]);
            if (left)
                out_pad(&s, ' ', width - (int)n);
            break;
        }
        case 'e':
        case 'E':
        case 'f':
        case 'F':
        case 'g':
        case 'G':
            out_double(&s, va_arg(ap, double), c, prec, width, left);
            break;
        case 'n':
            (void)va_arg(ap, int *);
            break;
        default: out_c(&s, c);
        }
    }
    if (cap)
        buf[s.len < cap ? s.len : cap - 1] = 0;
    return s.len > INT32_MAX ? -1 : (int)s.len;
}

int snprintf(char *restrict buf, size_t cap, const char *restrict fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
    return n;
}
