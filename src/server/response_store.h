// ResponseStore: the conversations of recent /v1/responses replies, kept in memory so a
// client can continue one by previous_response_id instead of sending it again.
//
// Threads: any (HTTP workers); one mutex guards everything.
//
// Invariants:
//  1. A response is found only under the namespace it was stored in (its API key's cache
//     namespace): one client never reads, nor learns of, another's responses.
//  2. At most max_responses entries and max_bytes of message text are held; past either,
//     the least recently stored or read entries go first. A response evicted, never
//     stored, or stored under another namespace reads the same: not found.
//  3. Entries are immutable once stored; Find returns a shared, read-only copy.
#pragma once

#include <cstddef>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "api/types.h"

namespace hearth::server {

class ResponseStore {
 public:
  using Conversation = std::vector<api::Message>;

  ResponseStore(size_t max_responses, size_t max_bytes) : max_responses_(max_responses), max_bytes_(max_bytes) {}

  // Keeps `conversation` as what response `id` continues from. A conversation larger
  // than max_bytes is not kept.
  void Put(const std::string& ns, const std::string& id, Conversation conversation);
  // The conversation stored for `id` in `ns`, or null.
  std::shared_ptr<const Conversation> Find(const std::string& ns, const std::string& id);

  size_t size() const;
  size_t bytes() const;

 private:
  using Key = std::pair<std::string, std::string>;  // (namespace, id)
  struct Entry {
    std::shared_ptr<const Conversation> conversation;
    size_t bytes = 0;
    std::list<Key>::iterator lru;  // its place in lru_
  };
  void EvictOver();  // REQUIRES: mu_ held

  const size_t max_responses_;
  const size_t max_bytes_;
  mutable std::mutex mu_;
  std::map<Key, Entry> entries_;  // guarded by mu_
  std::list<Key> lru_;            // guarded by mu_; most recent at the front
  size_t bytes_ = 0;              // guarded by mu_
};

}  // namespace hearth::server
