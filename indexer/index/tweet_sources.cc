#include "indexer/index/tweet_sources.h"

#include <utility>

namespace tweetsearch::index {

IndexDoc ToIndexDoc(SyntheticTweet t) {
  return IndexDoc{t.id,
                  t.user_id,
                  std::move(t.user_name),
                  std::move(t.text),
                  t.created_at_ms,
                  std::move(t.lang),
                  t.likes};
}

IndexDoc ToIndexDoc(ImportedTweet t) {
  return IndexDoc{t.id, t.user_id, std::move(t.user_name), std::move(t.text), t.created_at_ms,
                  "en", t.likes};
}

}  // namespace tweetsearch::index
