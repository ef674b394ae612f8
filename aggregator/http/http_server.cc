#include "aggregator/http/http_server.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <optional>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "aggregator/http/request_checks.h"
#include "aggregator/http/sse.h"
#include "common/strings.h"

namespace tweetsearch::aggregator {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

class Server;

// One connection. All members are touched only on the connection's strand.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket&& socket, Server& server, std::string peer);
  ~Session();

  void Start() {
    net::dispatch(stream_.get_executor(),
                  beast::bind_front_handler(&Session::Read, shared_from_this()));
  }

  // Closes the connection if it is waiting for a request (at shutdown, and to make room), or
  // serves a stream (at shutdown; streams are never idle to the acceptor).
  void CloseIfIdle() {
    net::post(stream_.get_executor(), [self = shared_from_this()] {
      // The pending read then fails and ends the session.
      if (!self->busy_ || self->live_ != nullptr) self->Close();
    });
  }

  // When (steady clock, ns) the connection began waiting for a request; 0 while a request is
  // read or served. Read by the acceptor to pick the longest-idle connection.
  int64_t idle_since() const { return idle_since_.load(std::memory_order_relaxed); }
  const std::string& peer() const { return peer_; }
  // Marks an idle connection as chosen for closing (no longer idle to the acceptor); false if
  // it stopped waiting since `since` was read, or another caller claimed it.
  bool ClaimIdle(int64_t since) {
    return since != 0 && idle_since_.compare_exchange_strong(since, 0, std::memory_order_relaxed);
  }

 private:
  void Read();
  void OnHeader(beast::error_code ec, size_t bytes);
  void OnRead(beast::error_code ec, size_t bytes);
  // Answers a request that cannot be read to its end (or is refused before its body), then
  // closes the connection.
  void Refuse(HttpResponse response);
  void SetIdle(bool idle) {
    idle_since_.store(idle ? std::chrono::steady_clock::now().time_since_epoch().count() : 0,
                      std::memory_order_relaxed);
  }
  void Write(HttpResponse response);
  void OnWrite(bool close, beast::error_code ec, size_t bytes);
  // A stream (GET /v1/stream): the answer's head and the stream's prelude, then batches of
  // events, each fetched and rendered on the worker pool (a stream catching up reads the change
  // log) and written here, one at a time. It ends when the client goes, a write stalls for
  // 30 s, or the stream ends (quota, shutdown).
  void StartStream(const HttpResponse& head, std::shared_ptr<LiveStream> live);
  void PumpStream();
  void WriteStream(std::string bytes, bool more, bool end);
  void WatchPeer();
  void KeepAlive();
  void EndStream() {
    live_.reset();
    keep_alive_.cancel();
    Close();
  }
  std::shared_ptr<LiveStream> live_;
  std::string stream_out_;
  bool stream_writing_ = false;  // a batch is being fetched or written
  bool stream_wake_ = false;     // events arrived meanwhile
  net::steady_timer keep_alive_;
  std::array<char, 512> peer_bytes_{};
  bool linger_ = false;  // the last request was not read to its end
  void Close() {
    beast::error_code ignored;  // the peer may be gone already; nothing to do about it
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
  }
  // Closes after a request that was not read to its end: send FIN, then read and discard what
  // the peer still sends (the rest of a body over the limit) until it closes too, for at most
  // two seconds. Closing with unread data would make the kernel send RST, and the peer could
  // lose our answer.
  void Linger() {
    beast::error_code ignored;  // the peer may be gone already; nothing to do about it
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(std::chrono::seconds(2));
    Drain();
  }
  void Drain() {
    drain_.resize(64 * 1024);
    stream_.async_read_some(
        net::buffer(drain_), [self = shared_from_this()](beast::error_code ec, size_t) {
          if (!ec && (self->drained_ += self->drain_.size()) < (size_t{16} << 20))
            return self->Drain();
          beast::error_code ignored;
          self->stream_.socket().close(ignored);
        });
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::shared_ptr<HttpResponse> response_;
  Server& server_;
  bool busy_ = false;
  std::string peer_;  // the client's IP address
  std::string drain_;
  size_t drained_ = 0;
  std::atomic<int64_t> idle_since_{0};
};

class Server final : public HttpServer {
 public:
  Server(const HttpServerOptions& options, ApiHandler& handler)
      : options_(options),
        handler_(handler),
        acceptor_(net::make_strand(ioc_)),
        workers_(static_cast<size_t>(std::max(1, options.worker_threads))) {}

  ~Server() override { Shutdown(std::chrono::milliseconds(5000)); }

  absl::Status Bind() {
    beast::error_code ec;
    const net::ip::address address = net::ip::make_address(options_.address, ec);
    if (ec)
      return absl::InvalidArgumentError(StrCat("bad listen address '", options_.address, "'"));
    const tcp::endpoint endpoint(address, options_.port);
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
    if (ec) {
      return absl::UnavailableError(
          StrCat("cannot listen on ", options_.address, ":", options_.port, ": ", ec.message()));
    }
    port_ = acceptor_.local_endpoint().port();
    Accept();
    const int io_threads = options_.io_threads > 0 ? options_.io_threads : 2;
    for (int i = 0; i < io_threads; ++i) {
      threads_.emplace_back([this] { ioc_.run(); });
    }
    return absl::OkStatus();
  }

  uint16_t port() const override { return port_; }

  void Shutdown(std::chrono::milliseconds grace) override {
    if (stopped_.exchange(true)) return;
    stopping_.store(true, std::memory_order_release);
    net::post(acceptor_.get_executor(), [this] {
      beast::error_code ignored;  // closing a listener that failed is fine
      acceptor_.close(ignored);
      backoff_.cancel();
    });
    std::vector<std::shared_ptr<Session>> live;
    {
      absl::MutexLock lock(&mu_);
      for (const std::weak_ptr<Session>& weak : sessions_) {
        if (auto session = weak.lock()) live.push_back(std::move(session));
      }
    }
    // Outside mu_: dropping the last reference destroys a session, which takes mu_.
    for (const auto& session : live) session->CloseIfIdle();
    live.clear();
    {
      absl::MutexLock lock(&mu_);
      auto drained = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return live_ == 0; };
      mu_.AwaitWithTimeout(absl::Condition(&drained), absl::FromChrono(grace));
    }
    workers_.join();
    {
      // Searches end by their deadline (a cluster's fan-out has one), so this wait does too.
      absl::MutexLock lock(&mu_);
      auto answered = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return answering_ == 0; };
      mu_.Await(absl::Condition(&answered));
    }
    ioc_.stop();
    for (std::thread& t : threads_) t.join();
  }

  bool stopping() const { return stopping_.load(std::memory_order_acquire); }
  ApiHandler& handler() { return handler_; }
  net::thread_pool& workers() { return workers_; }
  const HttpServerOptions& options() const { return options_; }

  size_t max_connections() const override { return max_connections_; }

  // Checks a request's header before its body is read: OK, or the answer to send (the
  // connection is closed after it).
  std::optional<HttpResponse> CheckHeader(const HttpRequestHeader& header) {
    if (absl::Status s = CheckFraming(header); !s.ok()) {
      Count(refused_framing_);
      return ErrorResponse(s, header.version(), false);
    }
    if (absl::Status s = host_policy_.Check(header); !s.ok()) {
      Count(refused_host_);
      return ErrorResponse(s, header.version(), false);
    }
    if (absl::Status s = CheckWriteContentType(header); !s.ok()) {
      Count(refused_content_type_);
      HttpResponse response = ErrorResponse(s, header.version(), false);
      response.result(http::status::unsupported_media_type);
      return response;
    }
    return std::nullopt;
  }

  // A request answered later (ApiHandler::HandleAsync) begins and ends its answer: Shutdown()
  // waits for every answer begun, since the handler and the front door answer it.
  void BeginAnswer() {
    absl::MutexLock lock(&mu_);
    ++answering_;
  }
  void EndAnswer() {
    absl::MutexLock lock(&mu_);
    --answering_;
  }

  // Removes a session from the counts (its destructor).
  void Unregister(const std::string& peer) {
    absl::MutexLock lock(&mu_);
    --live_;
    if (auto it = per_client_.find(peer); it != per_client_.end() && --it->second == 0) {
      per_client_.erase(it);
    }
  }

  void RenderMetrics(std::string* out) const override {
    size_t live;
    {
      absl::MutexLock lock(&mu_);
      live = live_;
    }
    auto series = [&](std::string_view name, std::string_view type, std::string_view help) {
      StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
    };
    series("tweetsearch_http_connections", "gauge", "Open HTTP connections.");
    StrAppend(out, "tweetsearch_http_connections ", live, "\n");
    series("tweetsearch_http_connection_limit", "gauge", "The cap on open HTTP connections.");
    StrAppend(out, "tweetsearch_http_connection_limit ", max_connections_, "\n");
    series("tweetsearch_http_connections_refused_total", "counter",
           "New connections answered 503 and closed, by the cap that refused them.");
    StrAppend(out, "tweetsearch_http_connections_refused_total{reason=\"server_full\"} ",
              Load(refused_server_full_), "\n",
              "tweetsearch_http_connections_refused_total{reason=\"client_full\"} ",
              Load(refused_client_full_), "\n");
    series("tweetsearch_http_idle_connections_closed_total", "counter",
           "Idle keep-alive connections closed to make room for new ones.");
    StrAppend(out, "tweetsearch_http_idle_connections_closed_total ", Load(evicted_), "\n");
    series("tweetsearch_http_accept_errors_total", "counter",
           "accept() failures, by cause (no_descriptors: EMFILE or ENFILE).");
    StrAppend(out, "tweetsearch_http_accept_errors_total{error=\"no_descriptors\"} ",
              Load(accept_no_fds_), "\n", "tweetsearch_http_accept_errors_total{error=\"other\"} ",
              Load(accept_other_), "\n");
    series("tweetsearch_http_requests_refused_total", "counter",
           "Requests refused from their header, before the body was read, by check.");
    StrAppend(out, "tweetsearch_http_requests_refused_total{check=\"framing\"} ",
              Load(refused_framing_), "\n",
              "tweetsearch_http_requests_refused_total{check=\"host\"} ", Load(refused_host_), "\n",
              "tweetsearch_http_requests_refused_total{check=\"content_type\"} ",
              Load(refused_content_type_), "\n");
  }

 private:
  static uint64_t Load(const std::atomic<uint64_t>& n) { return n.load(std::memory_order_relaxed); }
  static void Count(std::atomic<uint64_t>& n) { n.fetch_add(1, std::memory_order_relaxed); }

  // Logs a refusal at most once a second (a flood of them would flood the log).
  void LogRefusal(std::string_view what) {
    const int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
    int64_t last = last_refusal_log_.load(std::memory_order_relaxed);
    if (now - last < 1'000'000'000 ||
        !last_refusal_log_.compare_exchange_strong(last, now, std::memory_order_relaxed)) {
      return;
    }
    spdlog::warn(
        "http: {} (see tweetsearch_http_connections_refused_total and "
        "tweetsearch_http_accept_errors_total)",
        what);
  }

  // Closes the (at most) `n` connections that have waited longest for a request. False if
  // none is idle.
  bool CloseLongestIdle(size_t n = 1) {
    // Every reference taken under mu_ is dropped outside it: dropping the last one destroys a
    // session, whose destructor takes mu_ (a session may end on another thread meanwhile).
    std::vector<std::shared_ptr<Session>> live;
    {
      absl::MutexLock lock(&mu_);
      live.reserve(sessions_.size());
      for (const std::weak_ptr<Session>& weak : sessions_) {
        if (std::shared_ptr<Session> session = weak.lock()) live.push_back(std::move(session));
      }
    }
    std::vector<std::pair<int64_t, Session*>> idle;  // `live` keeps them alive
    for (const std::shared_ptr<Session>& session : live) {
      if (const int64_t since = session->idle_since(); since != 0) {
        idle.emplace_back(since, session.get());
      }
    }
    n = std::min(n, idle.size());
    std::partial_sort(idle.begin(), idle.begin() + n, idle.end(),
                      [](const auto& a, const auto& b) { return a.first < b.first; });
    size_t closed = 0;
    for (size_t i = 0; i < n; ++i) {
      // Claimed once: a connection already on its way out is not counted twice.
      if (!idle[i].second->ClaimIdle(idle[i].first)) continue;
      idle[i].second->CloseIfIdle();
      Count(evicted_);
      ++closed;
    }
    return closed > 0;
  }

  // Takes a new connection into the counts, or says why not ("" when admitted).
  std::string_view Admit(const std::string& peer) {
    absl::MutexLock lock(&mu_);
    size_t& from_peer = per_client_[peer];
    if (from_peer >= options_.max_connections_per_client) {
      if (from_peer == 0) per_client_.erase(peer);
      return "client_full";
    }
    if (live_ >= max_connections_) {
      if (from_peer == 0) per_client_.erase(peer);
      return "server_full";
    }
    ++from_peer;
    ++live_;
    return {};
  }

  // Answers 503 on a connection that is not admitted, and closes it. Best effort: the socket
  // is new, so its send buffer is empty and a short write does not block.
  static void Turn(tcp::socket& socket, std::string_view why) {
    const std::string body =
        StrCat("{\"error\":{\"code\":\"unavailable\",\"message\":\"", why, "\"}}");
    const std::string answer = StrCat(
        "HTTP/1.1 503 Service Unavailable\r\nServer: tweetsearch\r\n"
        "Content-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\n"
        "Content-Length: ",
        body.size(), "\r\n\r\n", body);
    beast::error_code ignored;  // the peer may be gone; nothing more to do for it
    socket.non_blocking(true, ignored);
    socket.write_some(net::buffer(answer), ignored);
    socket.shutdown(tcp::socket::shutdown_both, ignored);
    socket.close(ignored);
  }

  void OnAccepted(tcp::socket socket) {
    beast::error_code ec;
    const tcp::endpoint remote = socket.remote_endpoint(ec);
    const std::string peer = ec ? std::string() : remote.address().to_string();
    std::string_view refused = Admit(peer);
    if (refused == "server_full" && CloseLongestIdle()) {
      // The idle connection closes on its own strand; admit over the cap meanwhile (by one).
      absl::MutexLock lock(&mu_);
      ++per_client_[peer];
      ++live_;
      refused = {};
    }
    if (!refused.empty()) {
      Count(refused == "client_full" ? refused_client_full_ : refused_server_full_);
      LogRefusal(refused == "client_full"
                     ? StrCat("refused a connection from ", peer, ": it has ",
                              options_.max_connections_per_client, " open (the per-client cap)")
                     : StrCat("refused a connection: ", max_connections_,
                              " are open and none is idle (the connection cap)"));
      Turn(socket, refused == "client_full" ? "too many connections from this address"
                                            : "too many connections");
      return;
    }
    socket.set_option(tcp::no_delay(true), ec);
    auto session = std::make_shared<Session>(std::move(socket), *this, peer);
    {
      absl::MutexLock lock(&mu_);
      // Forget sessions that have ended, so the list stays as long as the live connections.
      if (sessions_.size() > 2 * live_ + 64) {
        std::erase_if(sessions_, [](const std::weak_ptr<Session>& w) { return w.expired(); });
      }
      sessions_.push_back(session);
    }
    session->Start();
  }

  // Out of file descriptors: make room by closing a few idle connections, and pause before
  // the next accept() instead of spinning on the error.
  void BackOff() {
    CloseLongestIdle(16);
    backoff_.expires_after(std::chrono::milliseconds(50));
    backoff_.async_wait([this](beast::error_code ec) {
      if (ec || !acceptor_.is_open()) return;
      Accept();
    });
  }

  void Accept() {
    acceptor_.async_accept(
        net::make_strand(ioc_), [this](beast::error_code ec, tcp::socket socket) {
          if (ec) {
            if (!acceptor_.is_open()) return;  // shut down
            if (ec == net::error::no_descriptors ||
                ec == boost::system::errc::too_many_files_open_in_system ||
                ec == net::error::no_buffer_space || ec == net::error::no_memory) {
              Count(accept_no_fds_);
              LogRefusal(StrCat("accept failed: ", ec.message(), "; pausing 50 ms"));
              return BackOff();
            }
            Count(accept_other_);
          } else if (stopping()) {
            return;
          } else {
            OnAccepted(std::move(socket));
          }
          Accept();
        });
  }

  // The cap: as configured, or derived from the soft open-file limit.
  static size_t ConnectionCap(const HttpServerOptions& options) {
    if (options.max_connections > 0) return options.max_connections;
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 10'000;
    const size_t soft = static_cast<size_t>(limit.rlim_cur);
    const size_t reserve = std::clamp<size_t>(soft / 4, 64, 256);
    return std::clamp<size_t>(soft > reserve ? soft - reserve : 1, 1, 10'000);
  }

  const HttpServerOptions options_;
  ApiHandler& handler_;
  const HostPolicy host_policy_{options_.address, options_.allowed_hosts};
  const size_t max_connections_ = ConnectionCap(options_);
  // Declared before ioc_, so they outlive it: destroying ioc_ destroys any handler still
  // queued, and with it a Session, whose destructor unregisters here.
  mutable absl::Mutex mu_;
  std::vector<std::weak_ptr<Session>> sessions_ ABSL_GUARDED_BY(mu_);
  size_t live_ ABSL_GUARDED_BY(mu_) = 0;
  size_t answering_ ABSL_GUARDED_BY(mu_) = 0;  // BeginAnswer() calls not yet ended
  absl::flat_hash_map<std::string, size_t> per_client_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> refused_server_full_{0}, refused_client_full_{0}, evicted_{0},
      accept_no_fds_{0}, accept_other_{0}, refused_framing_{0}, refused_host_{0},
      refused_content_type_{0};
  std::atomic<int64_t> last_refusal_log_{0};
  net::io_context ioc_;
  tcp::acceptor acceptor_;
  net::steady_timer backoff_{acceptor_.get_executor()};
  net::thread_pool workers_;
  std::vector<std::thread> threads_;
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> stopped_{false};
};

Session::Session(tcp::socket&& socket, Server& server, std::string peer)
    : keep_alive_(socket.get_executor()),
      stream_(std::move(socket)),
      server_(server),
      peer_(std::move(peer)) {}

Session::~Session() { server_.Unregister(peer_); }

void Session::Read() {
  if (server_.stopping()) return Close();
  busy_ = false;
  SetIdle(true);
  parser_.emplace();
  parser_->body_limit(server_.options().max_body_bytes);
  parser_->header_limit(16 * 1024);
  stream_.expires_after(server_.options().idle_timeout);
  http::async_read_header(stream_, buffer_, *parser_,
                          beast::bind_front_handler(&Session::OnHeader, shared_from_this()));
}

// Whether a read error means the peer went away (or the connection timed out or was closed):
// nothing to answer.
bool PeerGone(beast::error_code ec) {
  return ec == http::error::end_of_stream || ec == beast::error::timeout ||
         ec == net::error::operation_aborted || ec == net::error::connection_reset ||
         ec == net::error::bad_descriptor || ec == net::error::eof;
}

// The answer to a request that cannot be read to its end.
HttpResponse ReadErrorResponse(beast::error_code ec, size_t max_body_bytes) {
  if (ec == http::error::body_limit) {
    HttpResponse response =
        ErrorResponse(absl::ResourceExhaustedError(
                          StrCat("request body over the limit of ", max_body_bytes, " bytes")),
                      11, false);
    response.result(http::status::payload_too_large);
    return response;
  }
  return ErrorResponse(absl::InvalidArgumentError(StrCat("malformed HTTP request: ", ec.message())),
                       11, false);
}

void Session::OnHeader(beast::error_code ec, size_t) {
  SetIdle(false);
  if (PeerGone(ec)) return Close();
  if (ec) return Refuse(ReadErrorResponse(ec, server_.options().max_body_bytes));
  if (std::optional<HttpResponse> refusal = server_.CheckHeader(parser_->get())) {
    return Refuse(*std::move(refusal));
  }
  busy_ = true;  // no longer closed as idle (at shutdown, or to make room) while its body comes
  http::async_read(stream_, buffer_, *parser_,
                   beast::bind_front_handler(&Session::OnRead, shared_from_this()));
}

void Session::Refuse(HttpResponse response) {
  linger_ = true;
  busy_ = true;
  Write(std::move(response));
}

void Session::OnRead(beast::error_code ec, size_t) {
  if (PeerGone(ec)) return Close();
  if (ec) return Refuse(ReadErrorResponse(ec, server_.options().max_body_bytes));
  busy_ = true;
  auto request = std::make_shared<HttpRequest>(parser_->release());
  if (ApiHandler::MayBlock(*request, server_.options().best_match_inline)) {
    net::post(server_.workers(), [self = shared_from_this(), request] {
      std::unique_ptr<LiveStream> stream;
      HttpResponse response = self->server_.handler().Handle(*request, self->peer_, &stream);
      net::post(self->stream_.get_executor(),
                [self, r = std::make_shared<HttpResponse>(std::move(response)),
                 live = std::shared_ptr<LiveStream>(std::move(stream))]() mutable {
                  if (live != nullptr) return self->StartStream(*r, std::move(live));
                  self->Write(std::move(*r));
                });
    });
  } else {
    // Answered here, or (a search in a cluster) later on the thread its partitions answer on.
    server_.BeginAnswer();
    server_.handler().HandleAsync(
        std::move(request), peer_, [self = shared_from_this()](HttpResponse response) mutable {
          Server& server = self->server_;
          auto executor = self->stream_.get_executor();
          net::dispatch(executor, [self = std::move(self),
                                   r = std::make_shared<HttpResponse>(std::move(response))] {
            self->Write(std::move(*r));
          });
          // Nothing of the server is held past this: the session went with the write.
          server.EndAnswer();
        });
  }
}

void Session::Write(HttpResponse response) {
  if (server_.stopping()) response.keep_alive(false);
  const bool close = !response.keep_alive();
  response_ = std::make_shared<HttpResponse>(std::move(response));
  stream_.expires_after(std::chrono::seconds(30));
  http::async_write(stream_, *response_,
                    beast::bind_front_handler(&Session::OnWrite, shared_from_this(), close));
}

void Session::OnWrite(bool close, beast::error_code ec, size_t) {
  response_.reset();
  if (!ec && linger_) return Linger();
  if (ec || close) return Close();
  Read();
}

void Session::StartStream(const HttpResponse& head, std::shared_ptr<LiveStream> live) {
  live_ = std::move(live);
  std::string bytes = StrCat("HTTP/", head.version() / 10, ".", head.version() % 10, " 200 OK\r\n");
  for (const auto& field : head) {
    StrAppend(&bytes, std::string_view(field.name_string().data(), field.name_string().size()),
              ": ", std::string_view(field.value().data(), field.value().size()), "\r\n");
  }
  bytes += "\r\n";
  bytes += SsePrelude(*live_);
  // Posted, never run inline: the hub calls it holding its locks.
  live_->feed().OnReady([weak = weak_from_this(), ex = stream_.get_executor()] {
    net::post(ex, [weak] {
      if (auto self = weak.lock()) self->PumpStream();
    });
  });
  stream_writing_ = true;
  WriteStream(std::move(bytes), /*more=*/true, /*end=*/false);
  WatchPeer();
  KeepAlive();
}

void Session::PumpStream() {
  if (live_ == nullptr) return;
  if (stream_writing_) {
    stream_wake_ = true;
    return;
  }
  stream_writing_ = true;
  stream_wake_ = false;
  net::post(server_.workers(), [self = shared_from_this(), live = live_] {
    std::string out;
    bool more = false, end = false;
    absl::StatusOr<StreamFeed::Batch> batch = live->feed().Next(256);
    if (!batch.ok()) {
      out = SseEnd(batch.status());
      end = true;
    } else if (!batch->events.empty()) {
      // Charged before they are sent: refused, they stay in the log for a resume.
      if (absl::Status s = live->Charge(batch->events.size()); !s.ok()) {
        out = SseEnd(s);
        end = true;
      } else {
        AppendSseEvents(&out, batch->events);
        more = batch->more;
      }
    } else {
      more = batch->more;
    }
    net::post(self->stream_.get_executor(), [self, out = std::move(out), more, end]() mutable {
      self->WriteStream(std::move(out), more, end);
    });
  });
}

void Session::WriteStream(std::string bytes, bool more, bool end) {
  if (live_ == nullptr) return;  // the client went meanwhile
  if (bytes.empty()) {
    stream_writing_ = false;
    if (more || stream_wake_) PumpStream();
    return;
  }
  stream_out_ = std::move(bytes);
  stream_.expires_after(std::chrono::seconds(30));
  net::async_write(stream_, net::buffer(stream_out_),
                   [self = shared_from_this(), more, end](beast::error_code ec, size_t) {
                     self->stream_.expires_never();
                     self->stream_writing_ = false;
                     if (ec || end) return self->EndStream();
                     if (more || self->stream_wake_) self->PumpStream();
                   });
}

void Session::WatchPeer() {
  // A stream's client sends nothing more: a read that ends is the client going.
  stream_.async_read_some(net::buffer(peer_bytes_),
                          [self = shared_from_this()](beast::error_code ec, size_t) {
                            if (ec) return self->EndStream();
                            self->WatchPeer();
                          });
}

void Session::KeepAlive() {
  keep_alive_.expires_after(std::chrono::seconds(15));
  keep_alive_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (ec || self->live_ == nullptr) return;
    if (!self->stream_writing_) {
      self->stream_writing_ = true;
      self->WriteStream(std::string(kSseKeepAlive), false, false);
    }
    self->KeepAlive();
  });
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                              ApiHandler& handler) {
  auto server = std::make_unique<Server>(options, handler);
  if (absl::Status s = server->Bind(); !s.ok()) return s;
  return std::unique_ptr<HttpServer>(std::move(server));
}

}  // namespace tweetsearch::aggregator
