// The tile shapes cpu_blocked is instantiated for: X(block_n, block_k), the
// first its default. Its kernels and its descriptor both expand this list.
#pragma once

#define MOETUNE_CPU_BLOCKED_TILES(X) X(4, 64) X(8, 128) X(16, 256) X(32, 512)
