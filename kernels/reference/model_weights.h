// Where every tensor and synthetic input of the reference decode step comes
// from: descriptors over the weight hash (kernels/model/weight_gen.h) for a
// StepSpec, plus the synthetic token ids and KV caches. The `layer` of the
// hash is the decoder layer index (0-based); model-global tensors
// (embedding, final norm, lm_head, token ids) hash under layer 0 with their
// own tensor ids. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/reference/step_spec.h"
#include "kernels/reference/tensors.h"

namespace moetune::ref {

// Full, unsharded NVFP4 tensors (gate_up is [2*inter, hidden]: rows
// [0, inter) gate, [inter, 2*inter) up; down is [hidden, inter]).
Nvfp4TensorDesc ExpertGateUpDesc(const StepSpec& spec, int layer, int expert);
Nvfp4TensorDesc ExpertDownDesc(const StepSpec& spec, int layer, int expert);
Nvfp4TensorDesc SharedGateUpDesc(const StepSpec& spec, int layer);
Nvfp4TensorDesc SharedDownDesc(const StepSpec& spec, int layer);
Nvfp4TensorDesc DenseGateUpDesc(const StepSpec& spec, int layer);
Nvfp4TensorDesc DenseDownDesc(const StepSpec& spec, int layer);

// A BF16 projection by tensor id, with the shape the id has in this model:
// kQA, kQB, kKVA, kKVB, kO, kIndexerQB, kIndexerK, kIndexerWeights,
// kRouter, kEmbedding ([vocab, hidden]), kLmHead ([vocab, hidden]),
// kDenseGateUp and kDenseDown.
// Other ids give a 0 x 0 tensor.
Bf16TensorDesc Bf16Desc(const StepSpec& spec, int layer, uint32_t tensor);

// A projection in the format the workload gives its group
// (spec.quantization): attention's (kQA, kQB, kKVA, kKVB, kO, kIndexerQB,
// kIndexerK, kIndexerWeights), kLmHead, and the dense MLP's (kDenseGateUp
// [2 * dense_inter, hidden], kDenseDown [hidden, dense_inter]); other ids
// (kRouter, kEmbedding) are BF16. NVFP4 tensors are made as the experts'
// (tensor scale Nvfp4TensorScale(k)), BF16 ones as Bf16Desc's.
WeightDesc ProjectionDesc(const StepSpec& spec, int layer, uint32_t tensor);

// A norm's gamma: 1 + uniform(-0.1, 0.1), BF16-rounded noise, n values.
std::vector<float> NormGamma(const StepSpec& spec, int layer, uint32_t tensor,
                             int n);
// A norm's bias (the indexer key LayerNorm's): uniform(-0.1, 0.1),
// BF16-rounded, n values.
std::vector<float> NormBias(const StepSpec& spec, int layer, uint32_t tensor,
                            int n);

// Token id decoded by sequence b (hash of tensor kInput, index b), or the
// one a multi-step decode's previous step chose (spec.generated).
int TokenId(const StepSpec& spec, int sequence);

// Synthetic past entries of sequence b's caches at decoder layer `layer`,
// token t (0 <= t < context), from kernels/model/cache_gen.h: each sequence
// has its own cache and a longer context extends it. Past the synthetic
// ones (spec.generated), the entries a multi-step decode appended.
// Latent cache: kv_lora values with unit mean square (already RMS-normed),
// then qk_rope values uniform(-1, 1) (already rotated at their position, in
// place: ApplyRope's interleaved layout), all BF16 values; with an FP8
// cache (spec.kv_cache) the latent values as the FP8 cache stores those
// BF16 values (kernels/model/kv_fp8_format.h), read back as float. Indexer
// keys: index_head_dim values, unit mean square (already LayerNorm-ed, and
// their first qk_rope values rotated in the same layout), FP8 E4M3 values (the
// format DSA caches its keys in). Being synthetic, the values do not depend on
// the layout; the layout says how another implementation must read them
// (Hugging Face's cache holds the rotated part de-interleaved: evens, then
// odds).
void LatentCacheEntry(const StepSpec& spec, int layer, int sequence, int t,
                      float* out);
void IndexerKeyCacheEntry(const StepSpec& spec, int layer, int sequence, int t,
                          float* out);

}  // namespace moetune::ref
