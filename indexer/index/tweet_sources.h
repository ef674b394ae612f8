// Index documents from the project's tweet sources: the synthetic generator and imported CSV
// tweets (Sentiment140). Kept apart from index.h so that the index does not depend on them.
#ifndef TWEETSEARCH_INDEXER_INDEX_TWEET_SOURCES_H_
#define TWEETSEARCH_INDEXER_INDEX_TWEET_SOURCES_H_

#include "common/synthetic.h"
#include "common/tweet_csv.h"
#include "indexer/index/segment.h"

namespace tweetsearch::index {

IndexDoc ToIndexDoc(SyntheticTweet tweet);
// Sentiment140 tweets are English.
IndexDoc ToIndexDoc(ImportedTweet tweet);

}  // namespace tweetsearch::index

#endif  // TWEETSEARCH_INDEXER_INDEX_TWEET_SOURCES_H_
