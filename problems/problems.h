// Factories of the reference problems, one per file; problem.cc lists them.
#ifndef REMAT_PROBLEMS_PROBLEMS_H_
#define REMAT_PROBLEMS_PROBLEMS_H_

#include <memory>

#include "problems/problem.h"

namespace remat {

std::unique_ptr<Problem> MakeLayerLoss();     // seed 000
std::unique_ptr<Problem> MakeScanStack();     // seed 001
std::unique_ptr<Problem> MakeDotPolicy();     // seed 003
std::unique_ptr<Problem> MakeSinChain();      // seed 002, f2
std::unique_ptr<Problem> MakeSinPlain();      // seed 002, chain_compose
std::unique_ptr<Problem> MakeSinRecursive();  // seed 002, recursive_checkpoint
std::unique_ptr<Problem> MakeTransformerStack();  // scan of post-LN transformer blocks
std::unique_ptr<Problem> MakeMlpChain();      // seed 004, checkpoint_sequential
std::unique_ptr<Problem> MakeGpt();           // nanoGPT: embeddings, causal attention, dropout
std::unique_ptr<Problem> MakeGptScan();       // the same, its blocks one scan over layers
std::unique_ptr<Problem> MakeMoe();           // top-2 mixture of experts, a router built to tie
std::unique_ptr<Problem> MakeResNet();        // torchvision ResNet: conv, batch norm, max pooling
std::unique_ptr<Problem> MakeUnreached();     // gradients no cotangent reaches
std::unique_ptr<Problem> MakeBoundaries();    // max-pool ties and dropout's threshold, reached

}  // namespace remat

#endif  // REMAT_PROBLEMS_PROBLEMS_H_
