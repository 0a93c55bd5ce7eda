// The command line's side of a multi-process run (mpirun -np N brigade ...): the world of
// ranks the program runs in, the agreement between ranks at start, and the few things one
// rank does for all (print, write files) with what it gathers from the others.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "mpi/world.h"
#include "pipeline/trace.h"
#include "util/error.h"

namespace brigade::cli {

// The world main() made: a world of one when not started by mpirun.
mpi::World& world();
void set_world(mpi::World* w);

// An error every rank meets alike (ranks that disagree at start, a command that does not
// run under mpirun): rank 0 reports it in one line, every rank exits 2.
struct EveryRankError : UserError {
  using UserError::UserError;
};

// Refuses ranks whose `what` (flags, model, data, program version) differs from rank 0's,
// naming the first that does and what it has.
void agree(const std::string& what, const std::string& mine);

// A hash of a file's bytes, to compare between ranks ("" when it cannot be read).
std::string file_hash(const std::string& path);

// Whether any rank says yes (a signal arrived there): every rank gets the same answer.
bool any(bool mine);

// Tensors by name, packed to move between ranks.
std::string pack(const std::map<std::string, std::vector<float>>& tensors);
std::map<std::string, std::vector<float>> unpack(const std::string& bytes);
// Every rank's tensors, merged on every rank (the first rank's copy of a name wins).
std::map<std::string, std::vector<float>> gather_tensors(const std::map<std::string, std::vector<float>>& mine);

// Every rank's trace of one step as one (on every rank), each rank a process of its own;
// the first replica's ranks only (the others ran the same schedule on other rows).
pipeline::Trace gather_trace(const pipeline::Trace& mine, uint32_t stages);

}  // namespace brigade::cli
