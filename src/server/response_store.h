// ResponseStore: recent /v1/responses replies, kept in memory so a client can continue
// one by previous_response_id instead of sending its conversation again, and read
// (GET /v1/responses/{id}) or delete it.
//
// Threads: any (HTTP workers); one mutex guards everything.
//
// Invariants:
//  1. A response is found only under the namespace it was stored in (its API key's cache
//     namespace): one client never reads, nor learns of, another's responses.
//  2. At most max_responses entries and max_bytes of text (messages and response objects)
//     are held; past either, the least recently stored or read entries go first. A
//     response evicted, deleted, never stored, or stored under another namespace reads
//     the same: not found.
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
  struct Stored {
    Conversation conversation;  // what a request naming it continues from
    std::string response_json;  // the response object as its client got it
  };

  ResponseStore(size_t max_responses, size_t max_bytes) : max_responses_(max_responses), max_bytes_(max_bytes) {}

  // Keeps `stored` as response `id`. One larger than max_bytes is not kept.
  void Put(const std::string& ns, const std::string& id, Stored stored);
  // What is stored for `id` in `ns`, or null.
  std::shared_ptr<const Stored> Find(const std::string& ns, const std::string& id);
  // Forgets `id` in `ns`; returns whether it was held there (nothing else changes if not).
  // A copy Find returned stays valid.
  bool Erase(const std::string& ns, const std::string& id);

  size_t size() const;
  size_t bytes() const;

 private:
  using Key = std::pair<std::string, std::string>;  // (namespace, id)
  struct Entry {
    std::shared_ptr<const Stored> stored;
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
