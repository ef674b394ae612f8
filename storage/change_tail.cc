#include "storage/change_tail.h"

#include <thread>
#include <utility>

namespace tweetsearch::storage {

void TailChangeLog(ChangeSource& source, uint32_t partition, ChangeConsumer& consumer,
                   const TailOptions& options) {
  for (;;) {
    std::optional<ChangeConsumer::Position> at = consumer.Next(partition);
    if (!at.has_value()) return;
    absl::StatusOr<std::vector<ReplicatedChange>> changes =
        source.ReadChanges(at->after, options.batch, options.wait, at->keeps);
    if (absl::IsFailedPrecondition(changes.status())) {
      consumer.Trimmed(partition);
      continue;
    }
    if (!changes.ok()) {  // storage unreachable: try again shortly
      std::this_thread::sleep_for(absl::ToChronoMilliseconds(options.retry));
      continue;
    }
    const size_t read = changes->size();
    // Only what follows `after` without a gap (a source answers exactly that).
    size_t first = 0;
    while (first < changes->size() && (*changes)[first].change.sequence <= at->after) ++first;
    if (first > 0) changes->erase(changes->begin(), changes->begin() + first);
    if (!changes->empty() && changes->front().change.sequence == at->after + 1) {
      consumer.Apply(partition, *changes);
    }
    if (read < options.batch) consumer.AtEnd(partition);
  }
}

std::vector<std::thread> StartTailing(const std::vector<std::unique_ptr<ChangeSource>>& sources,
                                      ChangeConsumer& consumer, const TailOptions& options) {
  std::vector<std::thread> threads;
  for (uint32_t p = 0; p < sources.size(); ++p) {
    threads.emplace_back([&source = *sources[p], p, &consumer, options] {
      TailChangeLog(source, p, consumer, options);
    });
  }
  return threads;
}

}  // namespace tweetsearch::storage
