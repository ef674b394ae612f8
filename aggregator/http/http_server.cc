#include "aggregator/http/http_server.h"

#include <atomic>
#include <optional>
#include <thread>
#include <vector>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "absl/synchronization/mutex.h"
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
  Session(tcp::socket&& socket, Server& server);
  ~Session();

  void Start() {
    net::dispatch(stream_.get_executor(), beast::bind_front_handler(&Session::Read, shared_from_this()));
  }

  // Closes the connection if it is waiting for a request (used at shutdown).
  void CloseIfIdle() {
    net::post(stream_.get_executor(), [self = shared_from_this()] {
      if (!self->busy_) self->Close();  // the pending read then fails and ends the session
    });
  }

 private:
  void Read();
  void OnRead(beast::error_code ec, size_t bytes);
  void Write(HttpResponse response);
  void OnWrite(bool close, beast::error_code ec, size_t bytes);
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
    stream_.async_read_some(net::buffer(drain_), [self = shared_from_this()](
                                                     beast::error_code ec, size_t) {
      if (!ec && (self->drained_ += self->drain_.size()) < (size_t{16} << 20)) return self->Drain();
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
};

class Server final : public HttpServer {
 public:
  Server(const HttpServerOptions& options, ApiHandler& handler)
      : options_(options), handler_(handler), acceptor_(net::make_strand(ioc_)),
        workers_(static_cast<size_t>(std::max(1, options.worker_threads))) {}

  ~Server() override { Shutdown(std::chrono::milliseconds(5000)); }

  absl::Status Bind() {
    beast::error_code ec;
    const net::ip::address address = net::ip::make_address(options_.address, ec);
    if (ec) return absl::InvalidArgumentError(StrCat("bad listen address '", options_.address, "'"));
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
    for (int i = 0; i < std::max(1, options_.io_threads); ++i) {
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
    ioc_.stop();
    for (std::thread& t : threads_) t.join();
  }

  bool stopping() const { return stopping_.load(std::memory_order_acquire); }
  ApiHandler& handler() { return handler_; }
  net::thread_pool& workers() { return workers_; }
  const HttpServerOptions& options() const { return options_; }

  void Register(const std::shared_ptr<Session>& session) {
    absl::MutexLock lock(&mu_);
    ++live_;
    // Forget sessions that have ended, so the list stays as long as the live connections.
    if (sessions_.size() > 2 * live_ + 64) {
      std::erase_if(sessions_, [](const std::weak_ptr<Session>& w) { return w.expired(); });
    }
    sessions_.push_back(session);
  }
  void Unregister() {
    absl::MutexLock lock(&mu_);
    --live_;
  }

 private:
  void Accept() {
    acceptor_.async_accept(net::make_strand(ioc_), [this](beast::error_code ec, tcp::socket socket) {
      if (ec) {
        if (!acceptor_.is_open()) return;  // shut down
      } else if (stopping()) {
        return;
      } else {
        socket.set_option(tcp::no_delay(true), ec);
        auto session = std::make_shared<Session>(std::move(socket), *this);
        Register(session);
        session->Start();
      }
      Accept();
    });
  }

  const HttpServerOptions options_;
  ApiHandler& handler_;
  // Declared before ioc_, so they outlive it: destroying ioc_ destroys any handler still
  // queued, and with it a Session, whose destructor unregisters here.
  absl::Mutex mu_;
  std::vector<std::weak_ptr<Session>> sessions_ ABSL_GUARDED_BY(mu_);
  size_t live_ ABSL_GUARDED_BY(mu_) = 0;
  net::io_context ioc_;
  tcp::acceptor acceptor_;
  net::thread_pool workers_;
  std::vector<std::thread> threads_;
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> stopped_{false};
};

Session::Session(tcp::socket&& socket, Server& server)
    : stream_(std::move(socket)), server_(server) {
  beast::error_code ec;
  const tcp::endpoint remote = stream_.socket().remote_endpoint(ec);
  if (!ec) peer_ = remote.address().to_string();
}

Session::~Session() { server_.Unregister(); }

void Session::Read() {
  if (server_.stopping()) return Close();
  busy_ = false;
  parser_.emplace();
  parser_->body_limit(server_.options().max_body_bytes);
  parser_->header_limit(16 * 1024);
  stream_.expires_after(server_.options().idle_timeout);
  http::async_read(stream_, buffer_, *parser_,
                   beast::bind_front_handler(&Session::OnRead, shared_from_this()));
}

void Session::OnRead(beast::error_code ec, size_t) {
  if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
      ec == net::error::operation_aborted || ec == net::error::connection_reset ||
      ec == net::error::bad_descriptor || ec == net::error::eof) {
    return Close();
  }
  if (ec) {
    // The request cannot be read to its end: answer, then close.
    absl::Status status = ec == http::error::body_limit
        ? absl::ResourceExhaustedError(StrCat("request body over the limit of ",
                                              server_.options().max_body_bytes, " bytes"))
        : absl::InvalidArgumentError(StrCat("malformed HTTP request: ", ec.message()));
    HttpResponse response = ErrorResponse(status, 11, false);
    linger_ = true;
    if (ec == http::error::body_limit) {
      response.result(http::status::payload_too_large);
    }
    busy_ = true;
    return Write(std::move(response));
  }
  busy_ = true;
  auto request = std::make_shared<HttpRequest>(parser_->release());
  if (ApiHandler::MayBlock(*request)) {
    net::post(server_.workers(), [self = shared_from_this(), request] {
      HttpResponse response = self->server_.handler().Handle(*request, self->peer_);
      net::post(self->stream_.get_executor(),
                [self, r = std::make_shared<HttpResponse>(std::move(response))]() mutable {
                  self->Write(std::move(*r));
                });
    });
  } else {
    Write(server_.handler().Handle(*request, peer_));
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

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                              ApiHandler& handler) {
  auto server = std::make_unique<Server>(options, handler);
  if (absl::Status s = server->Bind(); !s.ok()) return s;
  return std::unique_ptr<HttpServer>(std::move(server));
}

}  // namespace tweetsearch::aggregator
