#include "server/request_log.h"

#include <algorithm>
#include <utility>

namespace hearth::server {

int RequestRecord::n_recomputed() const {
  return std::clamp(n_matched - n_reused, 0, std::max(0, n_prefilled));
}

void RequestLog::Add(RequestRecord record) {
  std::lock_guard<std::mutex> lock(mu_);
  record.id = next_id_++;
  records_.push_back(std::move(record));
  while (records_.size() > kCapacity) records_.pop_front();
}

std::vector<RequestRecord> RequestLog::Recent(const std::function<bool(const std::string& ns)>& visible) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<RequestRecord> out;
  for (const RequestRecord& r : records_) {
    if (!visible || visible(r.ns)) out.push_back(r);
  }
  return out;
}

}  // namespace hearth::server
