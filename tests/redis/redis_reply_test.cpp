// The Redis store's reply decoding and hash slots, on replies parsed from RESP bytes: no server.
#include <doctest/doctest.h>
#include <hiredis/read.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "hash_slot.hpp"
#include "helpers.hpp"
#include "reply.hpp"

using namespace idem;
using namespace idem::redis_detail;
using test::caught_store_error;
using namespace std::string_view_literals;

namespace {

struct reply_deleter {
    void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
using parsed = std::unique_ptr<redisReply, reply_deleter>;

// One reply, read by hiredis's own parser from the bytes a server would send.
parsed parse(std::string_view resp) {
    std::unique_ptr<redisReader, decltype(&redisReaderFree)> reader(redisReaderCreate(), redisReaderFree);
    REQUIRE(redisReaderFeed(reader.get(), resp.data(), resp.size()) == REDIS_OK);
    void* r = nullptr;
    REQUIRE(redisReaderGetReply(reader.get(), &r) == REDIS_OK);
    REQUIRE(r != nullptr);
    return parsed(static_cast<redisReply*>(r));
}

}  // namespace

TEST_CASE("redis hash slot: CRC16-XMODEM of the hash tag, as the cluster specification gives it") {
    CHECK(crc16("123456789") == 0x31c3);  // the specification's check value
    CHECK(crc16("") == 0);
    CHECK(hash_slot("123456789") == 0x31c3 % 16384);
    CHECK(hash_slot("foo") == 12182);  // CLUSTER KEYSLOT foo
    CHECK(hash_slot("bar") == 5061);

    CHECK(hash_tag("{user1000}.following") == "user1000");
    CHECK(hash_slot("{user1000}.following") == hash_slot("{user1000}.followers"));
    CHECK(hash_tag("foo{}{bar}") == "foo{}{bar}");    // an empty tag: the whole key
    CHECK(hash_tag("foo{{bar}}zap") == "{bar");       // from the first '{' to the next '}'
    CHECK(hash_tag("foo{bar}{zap}") == "bar");        // only the first tag
    CHECK(hash_tag("no}tag{here") == "no}tag{here");  // a '{' never closed
    CHECK(hash_tag(std::string_view("a{\0b}c", 6)) == std::string_view("\0b", 2));

    // A record key's storage key: a tag in the namespace or key decides its slot.
    const record_key a("orders{42}", "capture");
    const record_key b("orders{42}", "refund");
    CHECK(hash_slot(a.to_storage_key()) == hash_slot(b.to_storage_key()));
    CHECK(hash_slot(a.to_storage_key()) == hash_slot("42"));
    CHECK(hash_slot(record_key("payments", "{order-7}:capture").to_storage_key()) == hash_slot("order-7"));
}

TEST_CASE("redis replies: MOVED and ASK name the slot and node; anything else is no redirection") {
    const auto moved = parse_redirection("MOVED 3999 127.0.0.1:6381");
    REQUIRE(moved.has_value());
    CHECK_FALSE(moved->ask);
    CHECK(moved->slot == 3999);
    CHECK(moved->to == node_address{"127.0.0.1", 6381});

    const auto ask = parse_redirection("ASK 16383 [::1]:7000");
    REQUIRE(ask.has_value());
    CHECK(ask->ask);
    CHECK(ask->slot == 16383);
    CHECK(ask->to == node_address{"::1", 7000});
    CHECK(parse_redirection("ASK 0 fe80::1:7000")->to == node_address{"fe80::1", 7000});
    CHECK(parse_redirection("MOVED 12 :6380")->to == node_address{"", 6380});  // the sender's own host

    for (const std::string_view bad :
         {"", "MOVED", "MOVED 1", "MOVED 1 host", "MOVED 16384 h:1", "MOVED -1 h:1", "MOVED x h:1", "MOVED 1 h:0",
          "MOVED 1 h:65536", "MOVED 1 h:12x", "ERR MOVED 1 h:1", "TRYAGAIN Multiple keys", "moved 1 h:1"})
        CHECK_FALSE_MESSAGE(parse_redirection(bad).has_value(), bad);
}

TEST_CASE("redis replies: CLUSTER SLOTS gives each range its master; malformed replies are typed errors") {
    const auto ranges = parse_cluster_slots(*parse("*3\r\n"
                                                   "*4\r\n:0\r\n:5460\r\n*3\r\n$9\r\n127.0.0.1\r\n:7000\r\n$2\r\nid\r\n"
                                                   "*3\r\n$9\r\n127.0.0.1\r\n:7003\r\n$2\r\nid\r\n"
                                                   "*3\r\n:5461\r\n:10922\r\n*2\r\n$0\r\n\r\n:7001\r\n"
                                                   "*3\r\n:10923\r\n:16383\r\n*2\r\n$1\r\n?\r\n:7002\r\n"),
                                            {"10.0.0.9", 7009});
    REQUIRE(ranges.size() == 2);  // the range whose master's endpoint is unknown ("?") is left out
    CHECK(ranges[0].first == 0);
    CHECK(ranges[0].last == 5460);
    CHECK(ranges[0].master == node_address{"127.0.0.1", 7000});
    CHECK(ranges[1].first == 5461);
    CHECK(ranges[1].last == 10922);
    CHECK(ranges[1].master == node_address{"10.0.0.9", 7001});  // empty host: the node asked

    for (const std::string_view bad : {":1\r\n",                                               // not an array
                                       "*1\r\n*2\r\n:0\r\n:1\r\n",                             // no master
                                       "*1\r\n*3\r\n:0\r\n:16384\r\n*2\r\n$1\r\nh\r\n:1\r\n",  // slot out of range
                                       "*1\r\n*3\r\n:9\r\n:1\r\n*2\r\n$1\r\nh\r\n:1\r\n",      // ends before it starts
                                       "*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n:1\r\n:1\r\n",           // host not a string
                                       "*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n$1\r\nh\r\n:0\r\n",      // port 0
                                       "*1\r\n*3\r\n$1\r\n0\r\n:1\r\n*2\r\n$1\r\nh\r\n:1\r\n"})  // slot as a string
        CHECK_MESSAGE(caught_store_error([&] {
                          (void)parse_cluster_slots(*parse(bad), {"h", 1});
                      }).failure() == store_failure::other,
                      bad);
    const auto refused = caught_store_error([&] {
        (void)parse_cluster_slots(*parse("-ERR This instance has cluster support disabled\r\n"), {"h", 1});
    });
    CHECK(refused.failure() == store_failure::other);
    CHECK(refused.native_code() == "ERR");
}

TEST_CASE("redis replies: the scripts' answers decode to reservations; any other shape is corrupt_record") {
    CHECK(decode_reserve(*parse("*1\r\n:0\r\n"), "tok").status == reservation_status::reserved);
    CHECK(decode_reserve(*parse("*1\r\n:0\r\n"), "tok").token == "tok");
    CHECK(decode_reserve(*parse("*1\r\n:1\r\n"), "tok").status == reservation_status::in_flight);
    const auto done = decode_reserve(*parse("*2\r\n:2\r\n$5\r\na\0b\r\n\r\n"sv), "tok");
    CHECK(done.status == reservation_status::completed);
    CHECK(done.payload == std::string("a\0b\r\n", 5));
    CHECK(decode_reserve(*parse("*2\r\n:2\r\n$0\r\n\r\n"), "tok").payload.empty());
    CHECK(decode_reserve(*parse("*1\r\n:3\r\n"), "tok").status == reservation_status::fingerprint_mismatch);
    CHECK(decode_complete(*parse(":1\r\n")));
    CHECK_FALSE(decode_complete(*parse(":0\r\n")));
    CHECK(decode_release(*parse(":1\r\n")));
    CHECK_FALSE(decode_release(*parse(":0\r\n")));

    for (const std::string_view bad :
         {"*1\r\n:4\r\n", "*0\r\n", ":0\r\n", "*1\r\n$1\r\n0\r\n", "*1\r\n:9\r\n", "*2\r\n:2\r\n:5\r\n",
          "*2\r\n:0\r\n:0\r\n", "*1\r\n:2\r\n", "$-1\r\n", "+OK\r\n", "*3\r\n:2\r\n$1\r\np\r\n$1\r\nq\r\n"})
        CHECK_MESSAGE(caught_store_error([&] { (void)decode_reserve(*parse(bad), "tok"); }).failure() ==
                          store_failure::corrupt_record,
                      bad);
    for (const std::string_view bad : {":2\r\n", ":-1\r\n", "*1\r\n:1\r\n", "$1\r\n1\r\n", "$-1\r\n"})
        CHECK_MESSAGE(
            caught_store_error([&] { (void)decode_complete(*parse(bad)); }).failure() == store_failure::corrupt_record,
            bad);
    CHECK(caught_store_error([&] { (void)decode_release(*parse(":2\r\n")); }).failure() ==
          store_failure::corrupt_record);

    const time_point now{std::chrono::hours(1000)};
    CHECK(decode_forget(*parse("*1\r\n:0\r\n"), now).outcome == forget_outcome::not_found);
    const forget_result deleted = decode_forget(*parse("*3\r\n:1\r\n:1500\r\n:7\r\n"), now);
    CHECK(deleted.outcome == forget_outcome::deleted);
    CHECK(deleted.record.completed);
    CHECK(deleted.record.payload_bytes == 7);
    CHECK(deleted.record.expires_at == now + std::chrono::milliseconds(1500));
    const forget_result kept = decode_forget(*parse("*3\r\n:2\r\n:10\r\n:-1\r\n"), now);
    CHECK(kept.outcome == forget_outcome::refused_in_flight);
    CHECK_FALSE(kept.record.completed);
    CHECK(decode_forget(*parse("*3\r\n:1\r\n:10\r\n:-1\r\n"), now).outcome == forget_outcome::deleted);
    for (const std::string_view bad :
         {"*1\r\n:3\r\n", "*0\r\n", ":0\r\n", "*1\r\n:1\r\n", "*3\r\n:2\r\n:10\r\n:5\r\n", "*3\r\n:1\r\n:-1\r\n:5\r\n",
          "*3\r\n:1\r\n:10\r\n:-2\r\n", "*3\r\n:4\r\n:1\r\n:1\r\n", "*3\r\n:1\r\n$1\r\n1\r\n:1\r\n", "$-1\r\n"})
        CHECK_MESSAGE(caught_store_error([&] { (void)decode_forget(*parse(bad), now); }).failure() ==
                          store_failure::corrupt_record,
                      bad);

    CHECK_FALSE(decode_inspect(*parse("*1\r\n:0\r\n"), now));
    const auto running = decode_inspect(*parse("*3\r\n:1\r\n:1500\r\n:-1\r\n"), now);
    REQUIRE(running);
    CHECK_FALSE(running->completed);
    CHECK_FALSE(running->payload);
    CHECK(running->expires_at == now + std::chrono::milliseconds(1500));
    const auto sized = decode_inspect(*parse("*3\r\n:1\r\n:10\r\n:7\r\n"), now);
    REQUIRE(sized);
    CHECK(sized->completed);
    CHECK(sized->payload_bytes == 7);
    CHECK_FALSE(sized->payload);
    const auto read = decode_inspect(*parse("*4\r\n:1\r\n:10\r\n:3\r\n$3\r\na\0b\r\n"sv), now);
    REQUIRE(read);
    CHECK(read->payload == std::string("a\0b", 3));
    const auto empty = decode_inspect(*parse("*4\r\n:1\r\n:10\r\n:0\r\n$0\r\n\r\n"), now);
    REQUIRE(empty);
    CHECK(empty->payload == std::string());
    for (const std::string_view bad :
         {"*1\r\n:3\r\n", "*0\r\n", ":0\r\n", "*1\r\n:1\r\n", "*3\r\n:2\r\n:10\r\n:5\r\n", "*3\r\n:1\r\n:-1\r\n:5\r\n",
          "*3\r\n:1\r\n:10\r\n:-2\r\n", "*4\r\n:1\r\n:10\r\n:-1\r\n$0\r\n\r\n",
          "*4\r\n:1\r\n:10\r\n:4\r\n$3\r\nabc\r\n", "*4\r\n:1\r\n:10\r\n:3\r\n:3\r\n", "$-1\r\n"})
        CHECK_MESSAGE(caught_store_error([&] { (void)decode_inspect(*parse(bad), now); }).failure() ==
                          store_failure::corrupt_record,
                      bad);

    // Error replies keep their code; a slot on the move is transient.
    const auto moving =
        caught_store_error([&] { (void)decode_complete(*parse("-TRYAGAIN Multiple keys request\r\n")); });
    CHECK(moving.failure() == store_failure::timeout);
    CHECK(moving.is_transient());
    CHECK(moving.native_code() == "TRYAGAIN");
    CHECK(caught_store_error([&] {
              (void)decode_reserve(*parse("-CLUSTERDOWN The cluster is down\r\n"), "t");
          }).is_transient());
    CHECK(caught_store_error([&] { (void)decode_release(*parse("-WRONGTYPE Operation\r\n")); }).failure() ==
          store_failure::corrupt_record);
    CHECK(caught_store_error([&] { (void)decode_reserve(*parse("-MOVED 1 h:1\r\n"), "t"); }).failure() ==
          store_failure::unsupported);
}
