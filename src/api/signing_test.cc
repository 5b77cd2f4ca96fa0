// Tests for api/signing: SHA-256 and HMAC known answers (computed with `openssl dgst`), the
// canonical query and request, the Authorization header grammar, and the server's checks in order.
#include "api/signing.h"

#include <gtest/gtest.h>

#include <string>

#include "os/sha256.h"
#include "server/controller_testing.h"

namespace gpupool::api {
namespace {

constexpr char kBody[] = R"({"command":["true"]})";
// printf '%s' '{"command":["true"]}' | openssl dgst -sha256
constexpr char kBodySha256[] = "115438901f887201ae2820b4b950a5b193bfa241ce8465a34d22a5239e55f353";
// printf 'POST\n/v1/tasks\na=1&b=2\n<kBodySha256>\n1700000000000\n0123456789abcdef' |
//   openssl dgst -sha256 -hmac 's3cr3t-key'
constexpr char kSignature[] = "5a722047f8c6f81ccbf6a7ebe7d360621351a832bc1ad543ff498d7e3b1582c5";
constexpr int64_t kTimestamp = 1'700'000'000'000;
constexpr char kNonce[] = "0123456789abcdef";

TEST(Signing, BodyHashMatchesOpensslVector) { EXPECT_EQ(os::Sha256Hex(kBody), kBodySha256); }

TEST(Signing, CanonicalRequestAndSignatureMatchOpensslVector) {
  const Result<std::string> canonical =
      CanonicalRequest("POST", "/v1/tasks", "b=2&a=1", kBody, kTimestamp, kNonce);
  ASSERT_TRUE(canonical) << canonical.error().message;
  EXPECT_EQ(*canonical, std::string("POST\n/v1/tasks\na=1&b=2\n") + kBodySha256 +
                            "\n1700000000000\n0123456789abcdef");
  EXPECT_EQ(HmacSha256Hex("s3cr3t-key", *canonical), kSignature);
}

TEST(Signing, SecondVectorWithEmptyBodyAndQuery) {
  // printf 'GET\n/v1/tasks/t-1\n\n<sha256 of "">\n1700000000000\nabcdefghijklmnop' |
  //   openssl dgst -sha256 -hmac 'another-secret'
  const Result<std::string> header = SignRequest("AK2", "another-secret", "GET", "/v1/tasks/t-1",
                                                 "", kTimestamp, "abcdefghijklmnop");
  ASSERT_TRUE(header);
  EXPECT_EQ(*header,
            "GPUPOOL-HMAC-SHA256 Credential=AK2, Timestamp=1700000000000, "
            "Nonce=abcdefghijklmnop, "
            "Signature=e1f5f66bcbc3a8627ae1a60559825715c94916eebd6f79de5505c7863a62d3f8");
}

TEST(Signing, SignRequestSplitsTargetIntoPathAndQuery) {
  const Result<std::string> header =
      SignRequest("AK1", "s3cr3t-key", "POST", "/v1/tasks?b=2&a=1", kBody, kTimestamp, kNonce);
  ASSERT_TRUE(header);
  EXPECT_EQ(*header, std::string("GPUPOOL-HMAC-SHA256 Credential=AK1, Timestamp=1700000000000, "
                                 "Nonce=0123456789abcdef, Signature=") +
                         kSignature);
}

TEST(CanonicalQuery, SortsByNameThenValueAndReencodes) {
  struct Row {
    const char* raw;
    const char* canonical;
  };
  const Row rows[] = {
      {"", ""},
      {"b=2&a=1", "a=1&b=2"},
      {"a=2&a=1", "a=1&a=2"},
      {"state=running,pending", "state=running%2Cpending"},
      {"state=running%2cpending", "state=running%2Cpending"},
      {"q=a+b", "q=a%20b"},
      {"q=a%20b", "q=a%20b"},
      {"flag&x=", "flag=&x="},
      {"z=1&&y=2&", "y=2&z=1"},
      {"name=%E2%9C%93", "name=%E2%9C%93"},
      {"t=~-._", "t=~-._"},
  };
  for (const Row& row : rows) {
    const Result<std::string> got = CanonicalQuery(row.raw);
    ASSERT_TRUE(got) << row.raw;
    EXPECT_EQ(*got, row.canonical) << row.raw;
  }
}

TEST(CanonicalQuery, RejectsBadPercentEscape) {
  const Result<std::string> got = CanonicalQuery("limit=%zz");
  ASSERT_FALSE(got);
  EXPECT_NE(got.error().message.find("limit"), std::string::npos) << got.error().message;
}

TEST(Signing, BodyHashCoversEveryByte) {
  const auto sign = [](std::string_view body) {
    return *SignRequest("AK1", "k", "POST", "/v1/tasks", body, kTimestamp, kNonce);
  };
  EXPECT_NE(sign(R"({"a":1})"), sign(R"({"a":2})"));
  EXPECT_NE(sign(R"({"a":1})"), sign(R"({"a":1} )"));
  EXPECT_EQ(sign(R"({"a":1})"), sign(R"({"a":1})"));
}

TEST(ConstantTimeEquals, ComparesLengthAndBytes) {
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abcd"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
}

TEST(NewNonce, IsLongEnoughAndFresh) {
  const std::string a = NewNonce();
  const std::string b = NewNonce();
  EXPECT_EQ(a.size(), 32u);
  EXPECT_GE(a.size(), kMinNonceLength);
  EXPECT_NE(a, b);
}

TEST(ParseAuthorization, AcceptsFieldsInAnyOrderAndUpperCaseHex) {
  const std::string upper(64, 'A');
  const Result<Credential> c =
      ParseAuthorization("GPUPOOL-HMAC-SHA256 Signature=" + upper +
                         ",Nonce=0123456789abcdef,  Timestamp=17, Credential=AK1");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->access_key, "AK1");
  EXPECT_EQ(c->timestamp_ms, 17);
  EXPECT_EQ(c->nonce, kNonce);
  EXPECT_EQ(c->signature, std::string(64, 'a'));
  EXPECT_EQ(*ParseAuthorization(FormatAuthorization(*c)), *c);
}

TEST(ParseAuthorization, RejectsMalformedHeadersWithReason) {
  const std::string sig = std::string(64, 'a');
  const std::string ok_rest = ", Nonce=0123456789abcdef, Signature=" + sig;
  const std::vector<std::pair<std::string, std::string>> rows = {
      {"", "missing Authorization header"},
      {"Bearer abc", "scheme must be GPUPOOL-HMAC-SHA256"},
      {"GPUPOOL-HMAC-SHA256", "no fields"},
      {"GPUPOOL-HMAC-SHA256 Credential=AK1, Timestamp=1" + std::string(", Nonce=0123456789abcdef"),
       "Signature is missing"},
      {"GPUPOOL-HMAC-SHA256 Timestamp=1" + ok_rest, "Credential is missing"},
      {"GPUPOOL-HMAC-SHA256 Credential=AK1" + ok_rest, "Timestamp is missing"},
      {"GPUPOOL-HMAC-SHA256 Credential=AK1, Timestamp=abc" + ok_rest, "Timestamp must be"},
      {"GPUPOOL-HMAC-SHA256 Credential=AK1, Timestamp=-5" + ok_rest, "Timestamp must be"},
      {"GPUPOOL-HMAC-SHA256 Credential=AK1, Timestamp=99999999999999999999" + ok_rest,
       "Timestamp must be"},
      {"GPUPOOL-HMAC-SHA256 Credential=AK1, Timestamp=1, Nonce=short, Signature=" + sig,
       "Nonce must be 16..128"},
      {"GPUPOOL-HMAC-SHA256 Credential=AK1, Timestamp=1, Nonce=0123456789abcdef, Signature=xyz",
       "Signature must be 64 hex digits"},
      {"GPUPOOL-HMAC-SHA256 Credential=AK1, Credential=AK2, Timestamp=1" + ok_rest,
       "Credential given twice"},
      {"GPUPOOL-HMAC-SHA256 Credential=AK1, Region=x, Timestamp=1" + ok_rest,
       "unknown field 'Region'"},
      {"GPUPOOL-HMAC-SHA256 Credential=A K1, Timestamp=1" + ok_rest, "Credential must be"},
      {"GPUPOOL-HMAC-SHA256 Credential, Timestamp=1" + ok_rest, "has no '='"},
  };
  for (const auto& [header, expect] : rows) {
    const Result<Credential> c = ParseAuthorization(header);
    ASSERT_FALSE(c) << header;
    EXPECT_EQ(c.error().code, ErrorCode::kUnauthenticated) << header;
    EXPECT_NE(c.error().message.find(expect), std::string::npos)
        << header << " -> " << c.error().message;
  }
}

// --- VerifyRequest / ConsumeNonce against the real Controller ---

class VerifyTest : public server::testing::ControllerFixture {
 protected:
  void SetUp() override {
    ControllerFixture::SetUp();
    if (HasFatalFailure()) return;
    const server::Caller alice = server::testing::MakeMember(*c_, admin_, "u-alice", "p-1");
    alice_ = {alice.access_key, c_->LookupKey(alice.access_key)->secret};
    auto old =
        server::testing::Await<server::NewAccessKey>([&](server::Done<server::NewAccessKey> d) {
          c_->CreateAccessKey(admin_, "u-alice", "", d);
        });
    ASSERT_TRUE(old);
    old_ = {old->key.access_key, old->secret};
    ASSERT_TRUE(server::testing::Await<AccessKey>(
        [&](server::Done<AccessKey> d) { c_->RevokeAccessKey(admin_, old_.first, d); }));
    writes_at_start_ = Writes();
  }

  HttpRequest Signed(const std::pair<std::string, std::string>& key, int64_t ts,
                     const std::string& nonce = "nonce-0123456789") {
    HttpRequest r;
    r.method = "POST";
    r.target = "/v1/tasks?x=1";
    r.body = kBody;
    r.authorization = *SignRequest(key.first, key.second, r.method, r.target, r.body, ts, nonce);
    return r;
  }
  // The nonces the store holds once every write queued so far is durable.
  std::vector<Nonce> DurableNonces() {
    EXPECT_TRUE(store_->WriteSync(store::WriteBatch{}));
    return store_->Load({})->nonces;
  }
  size_t Writes() {
    EXPECT_TRUE(store_->WriteSync(store::WriteBatch{}));
    return store_->applied();
  }

  std::pair<std::string, std::string> alice_;  // (access key, secret)
  std::pair<std::string, std::string> old_;    // alice's revoked key
  size_t writes_at_start_ = 0;
};

TEST_F(VerifyTest, AcceptsAGoodSignatureWithoutRecordingTheNonce) {
  const Result<Verified> v = VerifyRequest(*c_, Signed(alice_, kTimestamp), kTimestamp + 1000);
  ASSERT_TRUE(v) << v.error().message;
  EXPECT_EQ(v->caller.user_id, "u-alice");
  EXPECT_EQ(v->credential.nonce, "nonce-0123456789");
  EXPECT_TRUE(DurableNonces().empty());
  ASSERT_TRUE(ConsumeNonce(*c_, *v, /*durable=*/true)) << "verifying did not take the nonce";
  const std::vector<Nonce> durable = DurableNonces();
  ASSERT_EQ(durable.size(), 1u);
  EXPECT_EQ(durable[0], (Nonce{alice_.first, "nonce-0123456789", kTimestamp}));
  const Status replay = ConsumeNonce(*c_, *v, true);
  ASSERT_FALSE(replay);
  EXPECT_EQ(replay.error().code, ErrorCode::kUnauthenticated);
}

TEST_F(VerifyTest, ChecksInOrderAndNamesTheReason) {
  struct Row {
    const char* name;
    HttpRequest request;
    int64_t now_ms;
    std::string expect;
  };
  HttpRequest tampered = Signed(alice_, kTimestamp);
  tampered.body = R"({"command":["false"]})";
  HttpRequest tampered_query = Signed(alice_, kTimestamp);
  tampered_query.target = "/v1/tasks?x=2";
  const Row rows[] = {
      {"missing", HttpRequest{"POST", "/v1/tasks", "", "", ""}, kTimestamp,
       "missing Authorization header"},
      {"unknown key", Signed({"AKNOBODY", "whatever"}, kTimestamp), kTimestamp,
       "unknown access key AKNOBODY"},
      {"revoked key", Signed(old_, kTimestamp), kTimestamp,
       "access key " + old_.first + " was revoked"},
      // A bad signature too, but the clock is checked first.
      {"timestamp behind", Signed({alice_.first, "wrong"}, kTimestamp - 412'000), kTimestamp,
       "request timestamp 1699999588000 is 412 s from server time; allowed ±300 s"},
      {"timestamp ahead", Signed(alice_, kTimestamp + 301'000), kTimestamp,
       "is 301 s from server time"},
      {"wrong secret", Signed({alice_.first, "not-alices-secret"}, kTimestamp), kTimestamp,
       "signature does not match for access key '" + alice_.first + "'"},
      {"tampered body", tampered, kTimestamp, "signature does not match"},
      {"tampered query", tampered_query, kTimestamp, "signature does not match"},
  };
  for (const Row& row : rows) {
    const Result<Verified> v = VerifyRequest(*c_, row.request, row.now_ms);
    ASSERT_FALSE(v) << row.name;
    EXPECT_EQ(v.error().code, ErrorCode::kUnauthenticated) << row.name;
    EXPECT_NE(v.error().message.find(row.expect), std::string::npos)
        << row.name << ": " << v.error().message;
    EXPECT_EQ(v.error().message.find(alice_.second), std::string::npos) << row.name;
    EXPECT_EQ(v.error().message.find(old_.second), std::string::npos) << row.name;
  }
  EXPECT_TRUE(DurableNonces().empty());
  EXPECT_EQ(Writes(), writes_at_start_) << "verifying writes nothing";
  // Nor did it take the nonce in memory: the good request's nonce is still fresh.
  EXPECT_TRUE(c_->ConsumeNonce(alice_.first, "nonce-0123456789", kTimestamp, false));
}

TEST_F(VerifyTest, ExactlyAtTheSkewLimitIsAccepted) {
  EXPECT_TRUE(VerifyRequest(*c_, Signed(alice_, kTimestamp), kTimestamp + kMaxClockSkewMs));
  EXPECT_TRUE(VerifyRequest(*c_, Signed(alice_, kTimestamp), kTimestamp - kMaxClockSkewMs));
}

// ------------------------------------------------------------------------------------------
// Console sessions: the cookie and the Set-Cookie values.

TEST(CookieValue, FindsTheNamedCookieAmongOthers) {
  EXPECT_EQ(CookieValue("gpupool_session=abc", kSessionCookie), "abc");
  EXPECT_EQ(CookieValue("theme=dark; gpupool_session=abc; lang=en", kSessionCookie), "abc");
  EXPECT_EQ(CookieValue("  gpupool_session=abc  ;x=1", kSessionCookie), "abc");
  EXPECT_EQ(CookieValue("gpupool_session=\"abc\"", kSessionCookie), "abc") << "quoted";
  EXPECT_EQ(CookieValue("gpupool_session=a; gpupool_session=b", kSessionCookie), "a");
  EXPECT_EQ(CookieValue("gpupool_session=", kSessionCookie), "");
  EXPECT_EQ(CookieValue("", kSessionCookie), std::nullopt);
  EXPECT_EQ(CookieValue("xgpupool_session=abc; gpupool_sessionx=abc", kSessionCookie),
            std::nullopt);
  EXPECT_EQ(CookieValue("gpupool_session", kSessionCookie), std::nullopt) << "no '='";
  EXPECT_EQ(CookieValue(";;", kSessionCookie), std::nullopt);
}

TEST(SessionSetCookie, IsHttpOnlyStrictForTheWholeSite) {
  EXPECT_EQ(SessionSetCookie("abc", 3600, false),
            "gpupool_session=abc; Path=/; HttpOnly; SameSite=Strict; Max-Age=3600");
  EXPECT_EQ(ClearedSessionSetCookie(false),
            "gpupool_session=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0");
}

TEST(SessionSetCookie, IsSecureWhenSetOverHttps) {
  EXPECT_EQ(SessionSetCookie("abc", 3600, true),
            "gpupool_session=abc; Path=/; HttpOnly; SameSite=Strict; Max-Age=3600; Secure");
  EXPECT_EQ(ClearedSessionSetCookie(true),
            "gpupool_session=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0; Secure");
  EXPECT_EQ(GatewaySetCookie("v", "/t/t-1/8888/", 60, true),
            "gpupool_gateway=v; Path=/t/t-1/8888/; HttpOnly; SameSite=Strict; Max-Age=60; Secure");
}

TEST(IsWriteMethod, EveryMethodButGetAndHead) {
  for (const char* m : {"POST", "PUT", "PATCH", "DELETE", "OPTIONS"}) EXPECT_TRUE(IsWriteMethod(m));
  EXPECT_FALSE(IsWriteMethod("GET"));
  EXPECT_FALSE(IsWriteMethod("HEAD"));
}

}  // namespace
}  // namespace gpupool::api
