#include "cache/redis_router.h"

#include <charconv>
#include <unordered_map>

namespace hearth::cache {
namespace {

// CRC16-CCITT (XMODEM: polynomial 0x1021, initial 0), the one Redis Cluster hashes keys with.
uint16_t Crc16(std::string_view s) {
  uint16_t crc = 0;
  for (unsigned char c : s) {
    crc = static_cast<uint16_t>(crc ^ (c << 8));
    for (int i = 0; i < 8; ++i) {
      crc = static_cast<uint16_t>((crc & 0x8000) != 0 ? (crc << 1) ^ 0x1021 : crc << 1);
    }
  }
  return crc;
}

}  // namespace

int RedisKeySlot(std::string_view key) {
  const size_t open = key.find('{');
  if (open != std::string_view::npos) {
    const size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) key = key.substr(open + 1, close - open - 1);
  }
  return Crc16(key) & 16383;
}

RedisRouter::RedisRouter(RedisEndpoint seed, RedisTimeouts timeouts)
    : seed_endpoint_(std::move(seed)), timeouts_(timeouts) {
  const std::string name = seed_endpoint_.Describe();
  seed_ = nodes_.emplace(name, std::make_unique<RedisConnection>(seed_endpoint_, timeouts_)).first->second.get();
}

RedisConnection& RedisRouter::For(std::string_view key) {
  RedisConnection* c = slots_[static_cast<size_t>(RedisKeySlot(key))];
  return c != nullptr ? *c : *seed_;
}

RedisConnection& RedisRouter::Node(const std::string& host, int port) {
  RedisEndpoint ep;
  ep.host = host;
  ep.port = port;
  ep.user = seed_endpoint_.user;
  ep.password = seed_endpoint_.password;  // a cluster's nodes share their ACL
  auto& slot = nodes_[ep.Describe()];
  if (!slot) slot = std::make_unique<RedisConnection>(ep, timeouts_);
  return *slot;
}

std::optional<RedisRouter::Redirect> RedisRouter::Follow(const redisReply& r) {
  if (r.type != REDIS_REPLY_ERROR) return std::nullopt;
  const std::string_view text(r.str, r.len);
  const bool moved = text.rfind("MOVED ", 0) == 0, ask = text.rfind("ASK ", 0) == 0;
  if (!moved && !ask) return std::nullopt;
  // "MOVED <slot> <host>:<port>"; the host may be empty (the node that answered): the seed's.
  const size_t sp1 = text.find(' '), sp2 = text.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos) return std::nullopt;
  const std::string_view slot_text = text.substr(sp1 + 1, sp2 - sp1 - 1), node = text.substr(sp2 + 1);
  const size_t colon = node.rfind(':');
  int slot = -1, port = 0;
  if (colon == std::string_view::npos) return std::nullopt;
  auto parse = [](std::string_view s, int* v) {
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
    return ec == std::errc() && end == s.data() + s.size();
  };
  if (!parse(slot_text, &slot) || slot < 0 || slot >= 16384 || !parse(node.substr(colon + 1), &port)) {
    return std::nullopt;
  }
  std::string host(node.substr(0, colon));
  if (!host.empty() && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) host = seed_endpoint_.host;
  RedisConnection& to = Node(host, port);
  if (moved) slots_[static_cast<size_t>(slot)] = &to;
  return Redirect{&to, ask};
}

Status RedisRouter::OnConnection(RedisConnection& conn, const std::function<Status()>& exchange) {
  const bool had = conn.connected();
  Status s = conn.Ensure();
  if (s.ok()) s = exchange();
  if (!s.ok() && had) {
    s = conn.Ensure();
    if (s.ok()) s = exchange();
  }
  return s;
}

Status RedisRouter::RunOnSlot(std::string_view key, size_t n, const std::function<RedisArgs(size_t)>& command,
                              const std::function<bool(size_t, const redisReply&)>& on_reply, size_t window,
                              const std::function<void()>& restart) {
  std::optional<Redirect> to;
  auto run = [&](RedisConnection& conn, bool ask) {
    return OnConnection(conn, [&] {
      restart();
      to.reset();
      if (!ask) {
        return conn.Pipeline(
            n, command,
            [&](size_t i, const redisReply& r) {
              if (i == 0 && (to = Follow(r))) return false;
              return on_reply(i, r);
            },
            window);
      }
      // ASKING holds for the one command after it: every command gets its own.
      return conn.Pipeline(
          2 * n, [&](size_t i) { return i % 2 == 0 ? RedisArgs{"ASKING"} : command(i / 2); },
          [&](size_t i, const redisReply& r) { return i % 2 == 0 ? r.type != REDIS_REPLY_ERROR : on_reply(i / 2, r); },
          2 * window);
    });
  };
  Status s = run(For(key), false);
  if (s.ok() && to) {
    const Redirect first = *to;
    s = run(*first.to, first.ask);
  }
  return s;
}

Status RedisRouter::GetMany(const std::vector<std::string>& keys,
                            const std::function<void(size_t, const redisReply&)>& on_value) {
  Status result;
  std::vector<size_t> pending(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) pending[i] = i;
  // A MOVED is learned and the key asked again where the slot map now points; an ASK is
  // asked of its node alone. Two rounds: a map that changes again meanwhile is a miss.
  for (int round = 0; round < 3 && !pending.empty(); ++round) {
    std::unordered_map<RedisConnection*, std::vector<size_t>> by_node;
    for (size_t i : pending) by_node[&For(keys[i])].push_back(i);
    std::vector<size_t> again;
    for (auto& node : by_node) {
      // Named, not bound: lambdas below capture them (clang before 16 cannot capture a
      // structured binding).
      RedisConnection* conn = node.first;
      const std::vector<size_t>& idx = node.second;
      std::vector<std::pair<size_t, Redirect>> redirected;
      Status s = OnConnection(*conn, [&] {
        redirected.clear();
        return conn->Pipeline(
            idx.size(), [&](size_t j) { return RedisArgs{"GET", keys[idx[j]]}; },
            [&](size_t j, const redisReply& r) {
              if (auto to = round < 2 ? Follow(r) : std::nullopt) {
                redirected.emplace_back(idx[j], *to);
              } else {
                on_value(idx[j], r);
              }
              return true;
            },
            idx.size());
      });
      if (!s.ok() && result.ok()) result = s;
      for (const auto& redirect : redirected) {
        const size_t i = redirect.first;
        const Redirect& to = redirect.second;
        if (!to.ask) {
          again.push_back(i);
          continue;
        }
        Status a = OnConnection(*to.to, [&] {
          return to.to->Pipeline(
              2, [&](size_t j) { return j == 0 ? RedisArgs{"ASKING"} : RedisArgs{"GET", keys[i]}; },
              [&](size_t j, const redisReply& r) {
                if (j == 1) on_value(i, r);
                return true;
              },
              2);
        });
        if (!a.ok() && result.ok()) result = a;
      }
    }
    pending = std::move(again);
  }
  return result;
}

}  // namespace hearth::cache
