#include "indexer/builder/service.h"

#include <algorithm>

#include "net/grpc.h"
#include "proto/cluster.grpc.pb.h"

namespace tweetsearch::indexer {
namespace {

using internal::v1::Builder;
namespace ipb = internal::v1;

class BuilderService final : public Builder::Service {
 public:
  explicit BuilderService(BuilderNode& node) : node_(node) {}

  grpc::Status PartitionIds(grpc::ServerContext*, const ipb::PartitionIdsRequest* request,
                            ipb::PartitionIdsResponse* response) override {
    return net::Guarded("Builder.PartitionIds", [&]() -> grpc::Status {
      const size_t max = request->max() == 0 ? 65536 : std::min<size_t>(request->max(), 1 << 20);
      absl::StatusOr<IdPage> page =
          node_.PartitionIds(request->index_partition(), request->after(), max);
      if (!page.ok()) return net::ToGrpc(page.status());
      response->mutable_ids()->Add(page->ids.begin(), page->ids.end());
      response->set_done(page->done);
      return grpc::Status::OK;
    });
  }

  grpc::Status PartitionCount(grpc::ServerContext*, const ipb::PartitionCountRequest* request,
                              ipb::PartitionCountResponse* response) override {
    return net::Guarded("Builder.PartitionCount", [&]() -> grpc::Status {
      absl::StatusOr<uint64_t> count = node_.PartitionCount(request->index_partition());
      if (!count.ok()) return net::ToGrpc(count.status());
      response->set_ids(*count);
      return grpc::Status::OK;
    });
  }

  grpc::Status Status(grpc::ServerContext*, const ipb::StatusRequest*,
                      ipb::BuilderStatus* response) override {
    return net::Guarded("Builder.Status", [&]() -> grpc::Status {
      const BuilderNodeStatus s = node_.Status();
      response->set_node(node_.options().node);
      for (uint64_t a : s.applied) response->add_applied(a);
      response->set_ids(s.ids_estimate);
      response->set_state(std::string(BuilderStateName(s.state)));
      response->set_resyncs(s.resyncs);
      return grpc::Status::OK;
    });
  }

 private:
  BuilderNode& node_;
};

}  // namespace

std::unique_ptr<grpc::Service> MakeBuilderService(BuilderNode& node) {
  return std::make_unique<BuilderService>(node);
}

}  // namespace tweetsearch::indexer
