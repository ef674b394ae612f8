#include "indexer/index/merged_docs.h"

#include <algorithm>

namespace tweetsearch::index {

MergedDocs::MergedDocs(std::span<PostingCursor* const> cursors, DocId end) : end_(end) {
  lists_.reserve(cursors.size());
  for (PostingCursor* cursor : cursors) lists_.push_back(List{cursor, {}, 0, 0});
}

void MergedDocs::Refill() {
  for (size_t i = 0; i < lists_.size();) {
    List& list = lists_[i];
    if (list.at == list.size) {
      list.at = 0;
      list.size = list.cursor->NextDocs(end_, list.docs.data(), kBuffer);
      if (list.size == 0) {
        lists_.erase(lists_.begin() + static_cast<std::ptrdiff_t>(i));
        continue;
      }
    }
    ++i;
  }
}

size_t MergedDocs::MergeTwo(DocId* out, size_t max) {
  List& a = lists_[0];
  List& b = lists_[1];
  size_t i = a.at, j = b.at, n = 0;
  while (i < a.size && j < b.size && n < max) {
    const DocId x = a.docs[i], y = b.docs[j];
    const DocId least = std::min(x, y);
    out[n++] = least;
    i += static_cast<size_t>(x == least);
    j += static_cast<size_t>(y == least);
  }
  a.at = i;
  b.at = j;
  return n;
}

size_t MergedDocs::Next(DocId* out, size_t max) {
  size_t n = 0;
  while (n < max) {
    Refill();
    if (lists_.empty()) break;
    if (lists_.size() == 1) {
      List& list = lists_[0];
      const size_t m = std::min(max - n, list.size - list.at);
      std::copy_n(list.docs.begin() + static_cast<std::ptrdiff_t>(list.at), m, out + n);
      list.at += m;
      n += m;
      // The rest of the list straight from its cursor, without the copy through the buffer.
      if (list.at == list.size && n < max) n += list.cursor->NextDocs(end_, out + n, max - n);
      continue;
    }
    if (lists_.size() == 2) {
      n += MergeTwo(out + n, max - n);
      continue;
    }
    DocId least = kEndDoc;
    for (const List& list : lists_) least = std::min(least, list.docs[list.at]);
    out[n++] = least;
    for (List& list : lists_) list.at += list.docs[list.at] == least ? 1 : 0;
  }
  return n;
}

}  // namespace tweetsearch::index
