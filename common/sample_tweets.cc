#include "common/sample_tweets.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string_view>

#include "common/snowflake.h"
#include "common/strings.h"

namespace tweetsearch {
namespace {

// The grammar: a template's {slot} is replaced by one of the slot's words (written here), or
// by a topic word from the word list ({topic}, {topic2}).
struct Slot {
  std::string_view name;
  std::vector<std::string_view> words;
};

const std::vector<Slot>& Slots() {
  static const auto* kSlots = new std::vector<Slot>{
      {"food",
       {"coffee", "tea", "pizza", "tacos", "pancakes", "ramen", "toast", "salad", "cookies",
        "ice cream", "soup", "sushi", "a burrito", "banana bread"}},
      {"place",
       {"the office", "the gym", "the park", "the beach", "the airport", "class", "work",
        "the library", "the station", "the mall", "the dentist", "my parents' place"}},
      {"time",
       {"this morning", "tonight", "today", "right now", "all day", "this weekend", "after work",
        "at lunch", "again", "for the first time"}},
      {"feel",
       {"tired", "happy", "excited", "bored", "hungry", "stressed", "grateful", "sleepy", "sad",
        "proud", "nervous", "relaxed"}},
      {"activity",
       {"running", "reading", "coding", "cooking", "studying", "working", "gaming", "painting",
        "shopping", "cleaning", "baking", "hiking", "writing", "dancing"}},
      {"media",
       {"the new album", "this song", "that movie", "the game last night", "the finale",
        "this podcast", "the book you sent me", "the new season", "that video"}},
      {"people",
       {"my mom", "my best friend", "my boss", "the team", "my sister", "the kids", "my roommate",
        "everyone here", "my dad", "our neighbours"}},
      {"adj",
       {"great", "terrible", "amazing", "weird", "perfect", "awful", "beautiful", "crazy", "lovely",
        "boring", "underrated", "so good"}},
      {"day", {"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"}},
  };
  return *kSlots;
}

constexpr std::array<std::string_view, 34> kTemplates = {
    "just had the best {food} {time}",
    "{time} i am so {feel}",
    "can't stop listening to {media}",
    "{people} just told me about {topic} and now i can't stop thinking about it",
    "heading to {place} {time}",
    "why is {place} always so {adj}",
    "{activity} {time} and feeling {feel}",
    "good morning everyone, {food} first",
    "does anyone else think {media} was {adj}?",
    "so {feel} after {activity} all day",
    "learning about {topic} {time}, it is {adj}",
    "{people} made {food} and it was {adj}",
    "new post about {topic} is up, let me know what you think",
    "can we talk about how {adj} {media} is",
    "i love {activity} but i hate {place}",
    "stuck at {place} again, send {food}",
    "happy {day}! time for {food} and {activity}",
    "missing {people} {time}",
    "finally finished {media}. {adj}",
    "who else is {activity} {time}?",
    "the weather {time} is {adj}",
    "rain again. perfect day for {activity} and {food}",
    "reading about {topic} and {topic2} {time}",
    "i love {media}, it is {adj}",
    "love this {day} so much",
    "anyone know a good place for {food} near {place}?",
    "{topic} is trending and i have no idea why",
    "my thoughts on {topic}: {adj}",
    "not gonna lie, {activity} with {people} was the best part of the week",
    "the {topic} at {place} is {adj}",
    "i need {food} and a nap",
    "thank you {people} for the {food}, love you",
    "spent the whole {day} {activity}. no regrets",
    "is it just me or is {topic} everywhere {time}",
};

// Tweets in other languages, whole (lang, text).
constexpr std::array<std::pair<std::string_view, std::string_view>, 16> kForeign = {{
    {"es", "buenos días a todos, café primero"},
    {"es", "qué calor hace hoy en la ciudad"},
    {"es", "me encanta esta canción"},
    {"es", "por fin es viernes, nos vemos en la playa"},
    {"fr", "bonjour tout le monde, café d'abord"},
    {"fr", "il pleut encore à Paris aujourd'hui"},
    {"fr", "j'adore ce film, vraiment magnifique"},
    {"fr", "bon week-end à tous"},
    {"de", "guten Morgen, erst mal Kaffee"},
    {"de", "heute ist so schönes Wetter"},
    {"de", "endlich Wochenende, ich bin so müde"},
    {"de", "das Spiel gestern war unglaublich"},
    {"ja", "おはようございます、今日もいい天気"},
    {"ja", "ラーメン食べたい"},
    {"ja", "週末は友達と映画を見ます"},
    {"ja", "電車が遅れている"},
}};

constexpr std::array<std::string_view, 14> kTags = {
    "#monday",  "#coffee", "#music",   "#travel", "#photography", "#tbt",    "#news",
    "#fitness", "#food",   "#weekend", "#love",   "#books",       "#gaming", "#nowplaying"};
constexpr std::array<std::string_view, 8> kEmoji = {"😂", "❤️", "🙌", "☕", "🎉", "😴", "🔥", "😍"};

// What tweets talk about, Zipf-picked (the first the most often). Written here rather than
// drawn from a word list: lists such as Debian's wamerican hold offensive words and no
// frequencies, and a demo must not show them.
constexpr std::array<std::string_view, 120> kTopics = {
    "music",         "football",     "coffee",    "rain",          "movies",       "elections",
    "pizza",         "homework",     "traffic",   "gardening",     "basketball",   "photography",
    "travel",        "cats",         "dogs",      "podcasts",      "concerts",     "science",
    "history",       "politics",     "weather",   "startups",      "baking",       "running",
    "books",         "poetry",       "jazz",      "robots",        "space",        "chess",
    "tennis",        "yoga",         "camping",   "painting",      "fashion",      "cooking",
    "video games",   "anime",        "comics",    "museums",       "the news",     "the economy",
    "climate",       "bicycles",     "trains",    "airports",      "beaches",      "mountains",
    "volcanoes",     "penguins",     "dolphins",  "sourdough",     "vinyl",        "typewriters",
    "glaciers",      "bonsai",       "kayaks",    "fossils",       "mushrooms",    "satellites",
    "puzzles",       "castles",      "tornadoes", "lanterns",      "quilts",       "orchids",
    "submarines",    "meteors",      "canyons",   "tulips",        "chocolate",    "telescopes",
    "lighthouses",   "marathons",    "origami",   "comets",        "pottery",      "hamsters",
    "knitting",      "skateboards",  "sunsets",   "thunderstorms", "architecture", "philosophy",
    "economics",     "chemistry",    "astronomy", "geology",       "languages",    "mathematics",
    "cricket",       "baseball",     "hockey",    "swimming",      "surfing",      "climbing",
    "festivals",     "weddings",     "birthdays", "holidays",      "exams",        "interviews",
    "recipes",       "smoothies",    "tea",       "bread",         "cheese",       "tacos",
    "electric cars", "solar panels", "rockets",   "bees",          "owls",         "foxes",
    "horses",        "rabbits",      "whales",    "bridges",       "libraries",    "parks"};

// User names: an adjective, a noun and a number.
constexpr std::array<std::string_view, 16> kNameFirst = {
    "happy",  "quiet", "sunny", "brave", "lazy",  "lucky",  "misty",  "rapid",
    "cosmic", "tiny",  "wild",  "urban", "salty", "golden", "silver", "velvet"};
constexpr std::array<std::string_view, 16> kNameSecond = {
    "fox",  "river", "panda", "otter", "comet", "maple", "falcon", "pixel",
    "moon", "tiger", "cloud", "cedar", "lark",  "wave",  "ember",  "fern"};

constexpr uint32_t kUsers = 20'000;

}  // namespace

SampleTweetGenerator::SampleTweetGenerator(const SampleOptions& options)
    : options_(options),
      rng_(options.seed),
      topic_cdf_(ZipfCdf(kTopics.size(), 1.0)),
      user_cdf_(ZipfCdf(kUsers, 0.9)) {}

std::string SampleTweetGenerator::UserName(size_t user) const {
  return StrCat(kNameFirst[user % kNameFirst.size()], "_",
                kNameSecond[user / kNameFirst.size() % kNameSecond.size()],
                user / (kNameFirst.size() * kNameSecond.size()));
}

double SampleTweetGenerator::Uniform() {
  return static_cast<double>(rng_() >> 11) * (1.0 / 9007199254740992.0);  // [0, 1)
}

std::string_view SampleTweetGenerator::Topic() { return kTopics[PickZipf(topic_cdf_, Uniform())]; }

std::string SampleTweetGenerator::Fill(std::string_view pattern) {
  std::string out;
  for (size_t i = 0; i < pattern.size();) {
    const size_t open = pattern.find('{', i);
    if (open == std::string_view::npos) {
      out.append(pattern.substr(i));
      break;
    }
    out.append(pattern.substr(i, open - i));
    const size_t close = pattern.find('}', open);
    const std::string_view name = pattern.substr(open + 1, close - open - 1);
    if (name.starts_with("topic")) {
      out += Topic();
    } else {
      for (const Slot& slot : Slots()) {
        if (slot.name == name) out.append(slot.words[Pick(slot.words.size())]);
      }
    }
    i = close + 1;
  }
  return out;
}

std::string SampleTweetGenerator::English() {
  std::string text = Fill(kTemplates[Pick(kTemplates.size())]);
  if (Uniform() < 0.25) text = StrCat("@", UserName(PickZipf(user_cdf_, Uniform())), " ", text);
  if (Uniform() < 0.08) {
    std::string path(Topic());
    std::replace(path.begin(), path.end(), ' ', '-');
    StrAppend(&text, " https://",
              std::array{"example.com", "example.org", "news.example.net"}[Pick(3)], "/", path);
  }
  if (Uniform() < 0.15) StrAppend(&text, " ", kTags[Pick(kTags.size())]);
  if (Uniform() < 0.12) StrAppend(&text, " ", kEmoji[Pick(kEmoji.size())]);
  return text;
}

SyntheticTweet SampleTweetGenerator::Next() {
  SyntheticTweet t;
  // Evenly over the span, oldest first, ending at now; ids never repeat (a millisecond holds
  // at most 4,096, then the next one is used).
  const int64_t step =
      options_.span_ms / static_cast<int64_t>(std::max<uint64_t>(options_.count, 1));
  int64_t millis = options_.now_ms - options_.span_ms +
                   static_cast<int64_t>(++index_) * std::max<int64_t>(step, 0);
  if (millis <= last_millis_) {
    millis = sequence_ < 0xFFF ? last_millis_ : last_millis_ + 1;
  }
  sequence_ = millis == last_millis_ ? sequence_ + 1 : 0;
  last_millis_ = millis;
  t.id = SnowflakeLowerBound(millis) | (TweetId{kSampleNode} << kSnowflakeSequenceBits) | sequence_;
  t.created_at_ms = millis;
  const size_t user = PickZipf(user_cdf_, Uniform());
  t.user_id = user + 1;
  t.user_name = UserName(user);
  // Pareto likes: P(likes >= x) ~ x^-1.1.
  t.likes = static_cast<uint32_t>(std::min(std::pow(1.0 - Uniform(), -1.0 / 1.1) - 1.0, 2e6));
  if (Uniform() < 0.05) {
    const auto& [lang, text] = kForeign[Pick(kForeign.size())];
    t.lang = std::string(lang);
    t.text = std::string(text);
  } else {
    t.lang = "en";
    t.text = English();
  }
  return t;
}

}  // namespace tweetsearch
