/*
 * GW_ASSERT states an invariant of our own code, never a check of peer
 * input (that is a counted refusal). Active in debug and sanitizer builds,
 * where a broken invariant should stop the test that found it; compiled
 * out of release builds (NDEBUG), where the gateway keeps serving.
 */
#ifndef GW_COMMON_ASSERT_H
#define GW_COMMON_ASSERT_H

void gw_assert_fail(const char *cond, const char *file, int line,
                    const char *func);

#if defined(NDEBUG) && !defined(GW_ASSERTS)
#define GW_ASSERT(cond) ((void)0)
#else
#define GW_ASSERT(cond)                                                        \
    ((cond) ? (void)0 : gw_assert_fail(#cond, __FILE__, __LINE__, __func__))
#endif

#endif /* GW_COMMON_ASSERT_H */
