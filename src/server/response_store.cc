#include "server/response_store.h"

namespace hearth::server {
namespace {

size_t BytesOf(const ResponseStore::Stored& s) {
  size_t n = s.response_json.size();
  for (const api::Message& m : s.conversation) {
    n += sizeof(api::Message) + m.role.size() + m.content.size() + m.reasoning_content.size() + m.tool_call_id.size() +
         m.tool_name.size();
    for (const api::ToolCall& t : m.tool_calls) n += sizeof(api::ToolCall) + t.id.size() + t.name.size() + t.arguments.size();
  }
  return n;
}

}  // namespace

void ResponseStore::Put(const std::string& ns, const std::string& id, Stored stored) {
  const size_t n = BytesOf(stored);
  if (n > max_bytes_ || max_responses_ == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  Key key{ns, id};
  if (auto it = entries_.find(key); it != entries_.end()) {  // ids are fresh; a repeat replaces
    bytes_ -= it->second.bytes;
    lru_.erase(it->second.lru);
    entries_.erase(it);
  }
  lru_.push_front(key);
  entries_[key] = Entry{std::make_shared<const Stored>(std::move(stored)), n, lru_.begin()};
  bytes_ += n;
  EvictOver();
}

std::shared_ptr<const ResponseStore::Stored> ResponseStore::Find(const std::string& ns, const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(Key{ns, id});
  if (it == entries_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second.lru);  // a conversation in use stays
  return it->second.stored;
}

bool ResponseStore::Erase(const std::string& ns, const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(Key{ns, id});
  if (it == entries_.end()) return false;
  bytes_ -= it->second.bytes;
  lru_.erase(it->second.lru);
  entries_.erase(it);
  return true;
}

void ResponseStore::EvictOver() {
  while (!lru_.empty() && (entries_.size() > max_responses_ || bytes_ > max_bytes_)) {
    auto it = entries_.find(lru_.back());
    bytes_ -= it->second.bytes;
    entries_.erase(it);
    lru_.pop_back();
  }
}

size_t ResponseStore::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

size_t ResponseStore::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

}  // namespace hearth::server
