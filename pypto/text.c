/* SPDX-License-Identifier: MIT */
/* libpypto: text output shared by the graph dumps, the trace and the page. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "pypto_int.h"

size_t pypto__utf8_len(const unsigned char *p)
{
	unsigned char c = p[0], lo, hi;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		return (p[1] & 0xc0) == 0x80 ? 2 : 0;
	/* The NUL terminator is no continuation byte: no overrun. */
	if (c >= 0xe0 && c <= 0xef) {
		lo = c == 0xe0 ? 0xa0 : 0x80;	/* no overlong form */
		hi = c == 0xed ? 0x9f : 0xbf;	/* no surrogate */
		return p[1] >= lo && p[1] <= hi &&
		       (p[2] & 0xc0) == 0x80 ? 3 : 0;
	}
	if (c >= 0xf0 && c <= 0xf4) {
		lo = c == 0xf0 ? 0x90 : 0x80;	/* no overlong form */
		hi = c == 0xf4 ? 0x8f : 0xbf;	/* <= U+10FFFF */
		return p[1] >= lo && p[1] <= hi && (p[2] & 0xc0) == 0x80 &&
		       (p[3] & 0xc0) == 0x80 ? 4 : 0;
	}
	return 0;
}

void pypto__json_str(FILE *f, const char *s, bool html_safe)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	size_t n;

	putc('"', f);
	while (*p) {
		unsigned char c = *p;

		if (c == '"' || c == '\\') {
			putc('\\', f);
			putc(c, f);
		} else if (c < 0x20 || c == 0x7f ||
			   (html_safe && (c == '<' || c == '>' || c == '&'))) {
			fprintf(f, "\\u%04x", c);
		} else if (c < 0x80) {
			putc(c, f);
		} else if ((n = pypto__utf8_len(p)) != 0) {
			fwrite(p, 1, n, f);
			p += n;
			continue;
		} else {
			fputs("\\ufffd", f);
		}
		p++;
	}
	putc('"', f);
}

void pypto__json_num(FILE *f, double v)
{
	if (isfinite(v))
		fprintf(f, "%.6g", v);
	else
		fputs("0", f);
}

const char *pypto__fmt_ns(char *buf, size_t len, double ns)
{
	if (ns >= 1e9)
		snprintf(buf, len, "%.3f s", ns / 1e9);
	else if (ns >= 1e6)
		snprintf(buf, len, "%.3f ms", ns / 1e6);
	else if (ns >= 1e3)
		snprintf(buf, len, "%.3f us", ns / 1e3);
	else
		snprintf(buf, len, "%.0f ns", ns);
	return buf;
}

const char *pypto__kind_name(int kind)
{
	switch (kind) {
	case PYPTO_COMPUTE:  return "compute";
	case PYPTO_TRANSFER: return "transfer";
	case PYPTO_HOST:     return "host";
	case PYPTO_ALLREDUCE: return "allreduce";
	default:	     return "unknown";
	}
}

int pypto__write_path(const char *path, const char *what,
		      int (*fn)(FILE *f, const void *arg), const void *arg)
{
	struct stat sb;
	bool regular;
	int ret, err = 0;
	FILE *f;

	f = fopen(path, "w");
	if (!f)
		return pypto__fail(PYPTO_ERR_SYS, "%s: cannot create %s: %s",
				   what, path, strerror(errno));
	/* Only a regular file is removed on failure: never /dev/full. */
	regular = !fstat(fileno(f), &sb) && S_ISREG(sb.st_mode);
	errno = 0;
	ret = fn(f, arg);
	if (!ret && (fflush(f) || ferror(f)))
		err = errno ? errno : EIO;
	if (fclose(f) && !ret && !err)
		err = errno ? errno : EIO;
	if (!ret && !err)
		return 0;
	if (regular)
		unlink(path);
	if (ret)
		return pypto__fail(-ret, "%s (%s)", pypto_errmsg(), path);
	return pypto__fail(PYPTO_ERR_SYS, "%s: cannot write %s: %s", what,
			   path, strerror(err));
}
