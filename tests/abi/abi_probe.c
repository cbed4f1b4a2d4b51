/*
 * A scratch library for abi.abidiff_selftest: its exported functions take libtenso's public
 * structs, so its ABI reaches their layout exactly as libtenso's does. Built in variants:
 *   (plain)             the baseline
 *   -DPROBE_ADD         one more function: a compatible addition, must pass
 *   -DPROBE_REMOVE      one function fewer: a removed symbol, must fail
 *   against copies of tenso.h with a field inserted: into tenso_tensor (at its start or end), a
 *   changed layout, must fail; at the end of tenso_encode_options, a versioned struct's growth,
 *   must pass
 */
#include <tenso/tenso.h>

__attribute__((visibility("default"))) uint32_t probe_tensor_rank(const tenso_tensor *t) { return t->ndim; }

__attribute__((visibility("default"))) uint32_t probe_encode_flags(const tenso_encode_options *o) { return o->flags; }

#ifndef PROBE_REMOVE
__attribute__((visibility("default"))) int probe_removed_in_variant(void) { return 2; }
#endif

#ifdef PROBE_ADD
__attribute__((visibility("default"))) int probe_added_in_variant(void) { return 1; }
#endif
