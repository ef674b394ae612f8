// gRPC server reflection, version 1 (proto/reflection_v1.proto), beside the v1alpha service
// Debian 12's gRPC provides: tools such as grpcurl and Postman ask for v1 first.
//
// It answers from the process's generated descriptor pool as the v1alpha service does, with
// the same bytes on the wire: a file comes with every file it imports (depth first, each once
// per answer); a name that is not found is an error_response with NOT_FOUND.
//
// Thread-safety: the service may be used from any thread.
#ifndef TWEETSEARCH_AGGREGATOR_REFLECTION_H_
#define TWEETSEARCH_AGGREGATOR_REFLECTION_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

namespace tweetsearch::aggregator {

// The reflection service, listing `services` (fully qualified names) as the server's.
std::unique_ptr<grpc::Service> MakeReflectionV1Service(std::vector<std::string> services);

// The name list_services answers with for it.
inline constexpr char kReflectionV1Service[] = "grpc.reflection.v1.ServerReflection";

}  // namespace tweetsearch::aggregator

#endif  // TWEETSEARCH_AGGREGATOR_REFLECTION_H_
