#include "server/request_stream.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

namespace hearth::server {
namespace {

using std::chrono::milliseconds;

api::Delta Text(std::string s) {
  api::Delta d;
  d.content = std::move(s);
  return d;
}

TEST(RequestStreamTest, EventsComeOutInOrderAndTimeOutWhenNoneWait) {
  RequestStream s;
  StreamEvent ev;
  EXPECT_FALSE(s.Next(&ev, milliseconds(0)));
  s.PushDelta(Text("a"));
  s.PushDelta(Text("b"));
  api::Completion c;
  c.content = "ab";
  s.PushDone(c);
  ASSERT_TRUE(s.Next(&ev, milliseconds(0)));
  EXPECT_EQ(ev.kind, StreamEvent::Kind::kDelta);
  EXPECT_EQ(ev.delta.content, "a");
  ASSERT_TRUE(s.Next(&ev, milliseconds(0)));
  EXPECT_EQ(ev.delta.content, "b");
  ASSERT_TRUE(s.Next(&ev, milliseconds(0)));
  EXPECT_EQ(ev.kind, StreamEvent::Kind::kDone);
  EXPECT_EQ(ev.completion.content, "ab");
  EXPECT_FALSE(s.Next(&ev, milliseconds(0)));
}

TEST(RequestStreamTest, NothingFollowsTheTerminalEvent) {
  RequestStream done;
  done.PushDone({});
  done.PushDelta(Text("late"));
  done.PushError(Internal("late"));
  done.PushDone({});
  StreamEvent ev;
  ASSERT_TRUE(done.Next(&ev, milliseconds(0)));
  EXPECT_EQ(ev.kind, StreamEvent::Kind::kDone);
  EXPECT_FALSE(done.Next(&ev, milliseconds(0)));

  RequestStream failed;
  failed.PushError(Unavailable("going down"));
  failed.PushDone({});
  ASSERT_TRUE(failed.Next(&ev, milliseconds(0)));
  EXPECT_EQ(ev.kind, StreamEvent::Kind::kError);
  EXPECT_EQ(ev.error.code(), StatusCode::kUnavailable);
  EXPECT_FALSE(failed.Next(&ev, milliseconds(0)));
}

TEST(RequestStreamTest, CancelIsSticky) {
  RequestStream s;
  EXPECT_FALSE(s.cancelled());
  s.Cancel();
  EXPECT_TRUE(s.cancelled());
  s.Cancel();
  EXPECT_TRUE(s.cancelled());
  // Cancelling does not close the stream: the engine still sends the final event.
  s.PushDone({});
  StreamEvent ev;
  ASSERT_TRUE(s.Next(&ev, milliseconds(0)));
  EXPECT_EQ(ev.kind, StreamEvent::Kind::kDone);
}

TEST(RequestStreamTest, OrderIsGlobalAcrossStreams) {
  RequestStream a, b;
  a.PushDelta(Text("1"));
  b.PushDelta(Text("2"));
  a.PushDelta(Text("3"));
  b.PushDone({});
  StreamEvent a1, b1, a2, b2;
  ASSERT_TRUE(a.Next(&a1, milliseconds(0)));
  ASSERT_TRUE(a.Next(&a2, milliseconds(0)));
  ASSERT_TRUE(b.Next(&b1, milliseconds(0)));
  ASSERT_TRUE(b.Next(&b2, milliseconds(0)));
  EXPECT_LT(a1.order, b1.order);
  EXPECT_LT(b1.order, a2.order);
  EXPECT_LT(a2.order, b2.order);
}

TEST(RequestStreamTest, ConsumerOnAnotherThreadSeesEverythingInOrder) {
  RequestStream s;
  constexpr int kN = 2000;
  std::thread producer([&s] {
    for (int i = 0; i < kN; ++i) s.PushDelta(Text(std::to_string(i)));
    s.PushDone({});
  });
  int next = 0;
  StreamEvent ev;
  while (s.Next(&ev, milliseconds(60000))) {
    if (ev.kind == StreamEvent::Kind::kDone) break;
    ASSERT_EQ(ev.delta.content, std::to_string(next));
    ++next;
  }
  producer.join();
  EXPECT_EQ(next, kN);
  EXPECT_EQ(ev.kind, StreamEvent::Kind::kDone);
}

// The admission event comes at most once and only before any output: a request that
// was requeued and admitted again keeps the report of its first admission.
TEST(RequestStreamTest, AdmittedComesAtMostOnceBeforeAnyDelta) {
  RequestStream s;
  api::Usage first;
  first.cached_tokens = 7;
  api::Usage again;
  again.cached_tokens = 9;
  s.PushAdmitted(first);
  s.PushAdmitted(again);
  s.PushDelta(Text("a"));
  s.PushDone({});
  StreamEvent ev;
  ASSERT_TRUE(s.Next(&ev, milliseconds(0)));
  EXPECT_EQ(ev.kind, StreamEvent::Kind::kAdmitted);
  EXPECT_EQ(ev.admitted.cached_tokens, 7);
  ASSERT_TRUE(s.Next(&ev, milliseconds(0)));
  EXPECT_EQ(ev.kind, StreamEvent::Kind::kDelta);
  ASSERT_TRUE(s.Next(&ev, milliseconds(0)));
  EXPECT_EQ(ev.kind, StreamEvent::Kind::kDone);

  RequestStream late;
  late.PushDelta(Text("a"));
  late.PushAdmitted(first);
  ASSERT_TRUE(late.Next(&ev, milliseconds(0)));
  EXPECT_EQ(ev.kind, StreamEvent::Kind::kDelta);
  EXPECT_FALSE(late.Next(&ev, milliseconds(0)));
}

}  // namespace
}  // namespace hearth::server
