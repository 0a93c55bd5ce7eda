#include "pipeline/topology.h"

#include <algorithm>
#include <numeric>

#include "pipeline/plan.h"
#include "util/error.h"

namespace brigade::pipeline {

Share Topology::share(uint32_t rows) const {
  const std::vector<uint32_t> shares = split_rows(rows, replicas());
  return {std::accumulate(shares.begin(), shares.begin() + replica(), 0u), shares[replica()]};
}

uint32_t Topology::largest_share(uint32_t rows) const { return split_rows(rows, replicas()).front(); }

std::vector<uint32_t> Topology::local_stages() const {
  std::vector<uint32_t> out;
  for (uint32_t k = 0; k < stages(); ++k)
    if (local(k)) out.push_back(k);
  return out;
}

OneProcess::OneProcess(uint32_t stages) {
  auto shared = std::make_shared<ThreadGroup::Shared>(stages);
  for (uint32_t k = 0; k < stages; ++k) threads_.push_back(std::make_unique<ThreadGroup>(shared, k));
}

std::unique_ptr<Link> OneProcess::remote_link(const RemoteEnd& end) {
  fail_invariant(__FILE__, __LINE__, end.name + ": every stage runs in this process");
}

}  // namespace brigade::pipeline
