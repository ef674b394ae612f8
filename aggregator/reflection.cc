#include "aggregator/reflection.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>

#include <unordered_set>

#include "proto/reflection_v1.grpc.pb.h"

namespace tweetsearch::aggregator {
namespace {

namespace rpb = grpc::reflection::v1;
using google::protobuf::Descriptor;
using google::protobuf::DescriptorPool;
using google::protobuf::FieldDescriptor;
using google::protobuf::FileDescriptor;

class ReflectionV1 final : public rpb::ServerReflection::Service {
 public:
  explicit ReflectionV1(std::vector<std::string> services)
      : services_(std::move(services)), pool_(*DescriptorPool::generated_pool()) {}

  grpc::Status ServerReflectionInfo(
      grpc::ServerContext* /*context*/,
      grpc::ServerReaderWriter<rpb::ServerReflectionResponse, rpb::ServerReflectionRequest>* stream)
      override {
    rpb::ServerReflectionRequest request;
    while (stream->Read(&request)) {
      rpb::ServerReflectionResponse response;
      response.set_valid_host(request.host());
      *response.mutable_original_request() = request;
      Answer(request, &response);
      if (!stream->Write(response)) break;
    }
    return grpc::Status::OK;
  }

 private:
  void Answer(const rpb::ServerReflectionRequest& request,
              rpb::ServerReflectionResponse* response) const {
    using Case = rpb::ServerReflectionRequest::MessageRequestCase;
    switch (request.message_request_case()) {
      case Case::kFileByFilename:
        return AddFile(pool_.FindFileByName(request.file_by_filename()), "file not found",
                       response);
      case Case::kFileContainingSymbol:
        return AddFile(pool_.FindFileContainingSymbol(request.file_containing_symbol()),
                       "symbol not found", response);
      case Case::kFileContainingExtension: {
        const rpb::ExtensionRequest& e = request.file_containing_extension();
        const Descriptor* type = pool_.FindMessageTypeByName(e.containing_type());
        if (type == nullptr) return Error(grpc::StatusCode::NOT_FOUND, "type not found", response);
        const FieldDescriptor* field = pool_.FindExtensionByNumber(type, e.extension_number());
        return AddFile(field == nullptr ? nullptr : field->file(), "extension not found", response);
      }
      case Case::kAllExtensionNumbersOfType: {
        const Descriptor* type =
            pool_.FindMessageTypeByName(request.all_extension_numbers_of_type());
        if (type == nullptr) return Error(grpc::StatusCode::NOT_FOUND, "type not found", response);
        std::vector<const FieldDescriptor*> extensions;
        pool_.FindAllExtensions(type, &extensions);
        rpb::ExtensionNumberResponse* out = response->mutable_all_extension_numbers_response();
        out->set_base_type_name(type->full_name());
        for (const FieldDescriptor* f : extensions) out->add_extension_number(f->number());
        return;
      }
      case Case::kListServices:
        for (const std::string& name : services_) {
          response->mutable_list_services_response()->add_service()->set_name(name);
        }
        return;
      case Case::MESSAGE_REQUEST_NOT_SET:
        break;
    }
    Error(grpc::StatusCode::UNIMPLEMENTED, "unknown reflection request", response);
  }

  static void Error(grpc::StatusCode code, const char* message,
                    rpb::ServerReflectionResponse* response) {
    response->mutable_error_response()->set_error_code(code);
    response->mutable_error_response()->set_error_message(message);
  }

  static void AddFile(const FileDescriptor* file, const char* missing,
                      rpb::ServerReflectionResponse* response) {
    if (file == nullptr) return Error(grpc::StatusCode::NOT_FOUND, missing, response);
    std::unordered_set<std::string> seen;
    AddFileAndImports(*file, &seen, response->mutable_file_descriptor_response());
  }

  // The file, then each file it imports that this answer does not hold yet, depth first.
  static void AddFileAndImports(const FileDescriptor& file, std::unordered_set<std::string>* seen,
                                rpb::FileDescriptorResponse* out) {
    if (!seen->insert(std::string(file.name())).second) return;
    google::protobuf::FileDescriptorProto proto;
    file.CopyTo(&proto);
    proto.SerializeToString(out->add_file_descriptor_proto());
    for (int i = 0; i < file.dependency_count(); ++i) {
      AddFileAndImports(*file.dependency(i), seen, out);
    }
  }

  const std::vector<std::string> services_;
  const DescriptorPool& pool_;
};

}  // namespace

std::unique_ptr<grpc::Service> MakeReflectionV1Service(std::vector<std::string> services) {
  return std::make_unique<ReflectionV1>(std::move(services));
}

}  // namespace tweetsearch::aggregator
