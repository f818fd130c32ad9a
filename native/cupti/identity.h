// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

/* identity.h: who the engine process is, from the variables its
 * OpenTelemetry SDK and the step hook read. Pure C, tested in
 * tests/test_limits.c.
 *
 * OTEL_RESOURCE_ATTRIBUTES is "key1=value1,key2=value2" with values
 * percent-encoded (OpenTelemetry SDK environment variables specification,
 * "General SDK Configuration"; the W3C Baggage octet rules). inferprof-run
 * puts service.instance.id there for the engine and every process it
 * starts. */
#ifndef INFERPROF_IDENTITY_H
#define INFERPROF_IDENTITY_H

#include <stddef.h>
#include <string.h>
#include <unistd.h>

static inline int id_hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* resource_attr copies the value of key in attrs (an
 * OTEL_RESOURCE_ATTRIBUTES string), percent-decoded and trimmed of
 * surrounding blanks, into out (n bytes with the terminator; longer values
 * are cut). It returns 1 when the key is there with a non-empty value. */
static inline int resource_attr(const char *attrs, const char *key, char *out, size_t n) {
  if (attrs == NULL || n == 0) return 0;
  size_t kl = strlen(key);
  const char *p = attrs;
  while (*p) {
    while (*p == ' ' || *p == '\t') p++;
    const char *end = strchr(p, ',');
    if (end == NULL) end = p + strlen(p);
    const char *eq = memchr(p, '=', (size_t)(end - p));
    if (eq != NULL) {
      const char *ke = eq;
      while (ke > p && (ke[-1] == ' ' || ke[-1] == '\t')) ke--;
      if ((size_t)(ke - p) == kl && memcmp(p, key, kl) == 0) {
        const char *v = eq + 1, *ve = end;
        while (v < ve && (*v == ' ' || *v == '\t')) v++;
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t')) ve--;
        size_t o = 0;
        while (v < ve && o + 1 < n) {
          int hi, lo;
          if (*v == '%' && ve - v >= 3 && (hi = id_hex(v[1])) >= 0 && (lo = id_hex(v[2])) >= 0) {
            out[o++] = (char)(hi << 4 | lo);
            v += 3;
          } else {
            out[o++] = *v++;
          }
        }
        out[o] = '\0';
        return o > 0;
      }
    }
    if (*end == '\0') break;
    p = end + 1;
  }
  out[0] = '\0';
  return 0;
}

/* engine_host names the engine's host for the collector: k8s.pod.name from
 * attrs when the pod sets it (the downward API's metadata.name), else
 * gethostname. Inside a pod the two agree; an engine on the host network
 * reads the node's name from gethostname, and the agent could then tie its
 * kernel series to no pod. */
static inline void engine_host(const char *attrs, char *out, size_t n) {
  if (n == 0 || resource_attr(attrs, "k8s.pod.name", out, n)) return;
  if (gethostname(out, n - 1) != 0) out[0] = '\0';
  out[n - 1] = '\0';
}

#endif
