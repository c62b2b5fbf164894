/* unwind_mix's shared library: CPU spent in a chain of its own functions,
 * built with or without frame pointers as the program that calls it. */
#ifndef EMBER_WORKLOADS_UNWIND_MIXLIB_H
#define EMBER_WORKLOADS_UNWIND_MIXLIB_H

#ifdef __cplusplus
extern "C" {
#endif

/* mixlib_entry -> mixlib_middle -> mixlib_leaf_burn, STEPS multiplies. */
unsigned long mixlib_entry(unsigned long steps);
/* Almost nothing: called in a loop, a fifth of the caller's time goes to
 * its PLT entry. */
unsigned long mixlib_step(unsigned long x);

#ifdef __cplusplus
}
#endif

#endif
