#include "cache/state_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <sstream>
#include <thread>

namespace hearth::cache {
namespace {

std::atomic<int> g_signals{0};
void CountSignal(int) { g_signals.fetch_add(1); }

// A blocking write that a signal interrupts before it wrote anything returns EINTR (the
// handler is installed without SA_RESTART, as a library cannot rule out); WriteAll tries
// again instead of failing the state's write.
TEST(StateFileTest, WriteAllRetriesWritesASignalInterrupted) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  // Fill the pipe, so that the next write blocks until the reader drains it.
  ASSERT_EQ(::fcntl(fds[1], F_SETFL, O_NONBLOCK), 0);
  size_t filled = 0;
  const char byte = 'f';
  while (::write(fds[1], &byte, 1) == 1) ++filled;
  ASSERT_EQ(errno, EAGAIN);
  ASSERT_EQ(::fcntl(fds[1], F_SETFL, 0), 0);

  struct sigaction sa = {}, old = {};
  sa.sa_handler = CountSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: the interrupted write returns EINTR
  ASSERT_EQ(::sigaction(SIGUSR1, &sa, &old), 0);
  const pthread_t writer = ::pthread_self();
  std::string drained;
  std::thread reader([&] {
    for (int i = 0; i < 5; ++i) {  // several, in case one lands before the write starts
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      ::pthread_kill(writer, SIGUSR1);
    }
    char buf[4096];
    ssize_t n = 0;
    while ((n = ::read(fds[0], buf, sizeof(buf))) != 0) {
      if (n > 0) drained.append(buf, static_cast<size_t>(n));
      if (n < 0 && errno != EINTR) break;
    }
  });
  const std::string payload(1000, 'p');
  const bool ok = WriteAll(fds[1], payload.data(), payload.size());
  ::close(fds[1]);  // the reader sees the end either way
  reader.join();
  ::close(fds[0]);
  ::sigaction(SIGUSR1, &old, nullptr);
  EXPECT_GT(g_signals.load(), 0);
  EXPECT_TRUE(ok) << "a write a signal interrupted is not a failed write";
  EXPECT_EQ(drained.size(), filled + payload.size());
  EXPECT_TRUE(drained.ends_with(payload)) << "every byte of the payload arrives, once";
}

TEST(StateFileTest, HeaderRoundTripsAndChecksumCatchesAFlippedByte) {
  StateHeader h;
  h.kind = StateKind::kFull;
  h.ns = "model|key-1|";
  h.tokens = {5, 6, 7};
  h.payload_len = 42;
  h.payload_hash = 99;
  const std::string encoded = EncodeStateHeader(h);
  std::istringstream in(encoded);
  StateHeader back;
  size_t size = 0;
  std::string why;
  ASSERT_TRUE(DecodeStateHeader(in, &back, &size, &why)) << why;
  EXPECT_EQ(size, encoded.size());
  EXPECT_EQ(back.kind, h.kind);
  EXPECT_EQ(back.ns, h.ns);
  EXPECT_EQ(back.tokens, h.tokens);
  EXPECT_EQ(back.payload_len, 42u);
  std::string flipped = encoded;
  flipped[20] = static_cast<char>(flipped[20] ^ 1);
  std::istringstream bad(flipped);
  EXPECT_FALSE(DecodeStateHeader(bad, &back, &size, &why));
}

// Found by tests/fuzz (state_file): a header with no tokens and an empty namespace had
// the decoder memcpy zero bytes into an empty vector's data(), a null pointer, which is
// undefined behaviour (UBSan, `make test-asan`, stops here without the fix).
TEST(StateFileTest, HeaderWithNoTokensAndNoNamespaceRoundTrips) {
  StateHeader h;
  h.kind = StateKind::kPartial;
  const std::string encoded = EncodeStateHeader(h);
  std::istringstream in(encoded);
  StateHeader back;  // tokens empty, data() null: where the decoder copied zero bytes to
  size_t size = 0;
  std::string why;
  ASSERT_TRUE(DecodeStateHeader(in, &back, &size, &why)) << why;
  EXPECT_EQ(size, encoded.size());
  EXPECT_TRUE(back.ns.empty());
  EXPECT_TRUE(back.tokens.empty());
  EXPECT_EQ(back.kind, StateKind::kPartial);
}

}  // namespace
}  // namespace hearth::cache
