// Where this process sits in a multi-process run, read from the environment
// that torchrun, baton's own launcher (launch_local) and compatible launchers set.
#pragma once

#include <optional>
#include <string>

namespace baton::comm {

struct RankEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;        // this process's index on its machine (its GPU)
  int local_world_size = 1;  // processes on this machine
  std::string master_addr;
  int master_port = 0;
  // MASTER_PORT itself where torchrun 2.x's agent hosts a store there
  // (TORCHELASTIC_USE_AGENT_STORE=True), else 0. LibTorch 2.x builds join that
  // store as every rank's client, as PyTorch's own workers do.
  int agent_store_port = 0;
};

// Reads RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and
// MASTER_PORT. Returns nullopt when neither RANK nor WORLD_SIZE is set (a
// single-process run). LOCAL_WORLD_SIZE defaults to WORLD_SIZE (one
// machine) and LOCAL_RANK to RANK % LOCAL_WORLD_SIZE. Throws baton::Error naming the variable and
// its value when one is missing, not an integer, or out of range. Under
// torchrun 2.x's agent store (TORCHELASTIC_USE_AGENT_STORE=True),
// agent_store_port is MASTER_PORT, and master_port is MASTER_PORT + 1: the
// port that a LibTorch 1.13 build, whose TCPStore client cannot speak to the
// agent's store, hosts its own store on.
std::optional<RankEnv> rank_env_from_environment();

}  // namespace baton::comm
