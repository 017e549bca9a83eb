/*
 * tap.h: the minimal test harness shared by the unit tests.
 *
 *   CHECK(expr)            record a failure (with file:line) if expr is false
 *   CHECK_EQ(a, b)         integers, prints both on failure
 *   CHECK_STR(a, b)        strings
 *   TEST(name) { ... }     define a case; RUN(name) runs it
 *   return tap_done();     from main: prints "N checks, N failed", exit code
 *
 * A test program exits 0 if every check passed, 1 if one failed, and 77
 * (skip) if it called tap_skip().
 */
#ifndef OBJFS_TAP_H
#define OBJFS_TAP_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_checks, tap_failed;
static const char *tap_case = "";

#define CHECK(expr)                                                                           \
	do {                                                                                  \
		tap_checks++;                                                                 \
		if (!(expr)) {                                                                \
			tap_failed++;                                                         \
			fprintf(stderr, "FAIL %s: %s:%d: %s\n", tap_case, __FILE__, __LINE__, \
				#expr);                                                       \
		}                                                                             \
	} while (0)

#define CHECK_EQ(a, b)                                                                         \
	do {                                                                                   \
		long long tap_a_ = (long long)(a), tap_b_ = (long long)(b);                    \
		tap_checks++;                                                                  \
		if (tap_a_ != tap_b_) {                                                        \
			tap_failed++;                                                          \
			fprintf(stderr, "FAIL %s: %s:%d: %s == %s (%lld != %lld)\n", tap_case, \
				__FILE__, __LINE__, #a, #b, tap_a_, tap_b_);                   \
		}                                                                              \
	} while (0)

#define CHECK_STR(a, b)                                                                            \
	do {                                                                                       \
		const char *tap_a_ = (a), *tap_b_ = (b);                                           \
		tap_checks++;                                                                      \
		if (!tap_a_ || !tap_b_ || strcmp(tap_a_, tap_b_)) {                                \
			tap_failed++;                                                              \
			fprintf(stderr, "FAIL %s: %s:%d: %s == %s (\"%s\" != \"%s\")\n", tap_case, \
				__FILE__, __LINE__, #a, #b, tap_a_ ? tap_a_ : "(null)",            \
				tap_b_ ? tap_b_ : "(null)");                                       \
		}                                                                                  \
	} while (0)

#define TEST(name) static void test_##name(void)
#define RUN(name)                                                                      \
	do {                                                                           \
		int tap_before_ = tap_failed;                                          \
		tap_case = #name;                                                      \
		test_##name();                                                         \
		printf("%s %s\n", tap_failed == tap_before_ ? "ok  " : "FAIL", #name); \
	} while (0)

static inline int tap_done(void)
{
	printf("%d checks, %d failed\n", tap_checks, tap_failed);
	return tap_failed ? 1 : 0;
}

static inline void tap_skip(const char *why)
{
	printf("skip: %s\n", why);
	exit(77);
}

#endif
