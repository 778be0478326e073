"""A third recall benchmark, built for the categories the held-out set finds weakest
(bench/bench_recall.py --set bridge):

- **multi-hop**: the answer needs two turns from different sessions joined by something
  the question never names — a person, a place, a book. "Where does the man who fixed
  Ana's bike work now?" needs "Tomasz fixed my bike on Saturday" (session 3) and "Tomasz
  got a job at the ferry yard" (session 11); the question shares no word with the second.
- **open**: questions answered only by inference from what was said in passing ("Is Ana
  a morning person?" ← "up at five again for a swim, I love the empty pool", "by nine at
  night I'm done, honestly"), over two or more sessions.
- **single**: plain facts, asked the way a person asks, so a method that helps the two
  above and hurts the plain lookup shows it.

Two friends chat over 14-18 dated sessions: greetings, small talk, the weather, work,
food — the common words every question shares — and the facts said in passing among
them, each in a sentence of its own kind. Every template has several phrasings, and
the people, places and things come from pools, so no one wording decides a question.
Generated from a seed by `random.Random`; the same seed gives the same set byte for
byte. Rows, questions and conversations are `recall_data`'s types, as the dialogue set's
turns are: each row is ``Name: text``, user and assistant roles alternating by speaker.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from recall_data import Conversation, Question, Row

CATEGORIES = ("single", "multi-hop", "open")

FRIENDS = [("Ana", "she"), ("Bruno", "he"), ("Chloe", "she"), ("Dmitri", "he"),
           ("Esther", "she"), ("Farid", "he"), ("Greta", "she"), ("Hugo", "he"),
           ("Imani", "she"), ("Jakob", "he"), ("Keiko", "she"), ("Luis", "he")]
OTHERS = ["Tomasz", "Renata", "Olu", "Marguerite", "Sven", "Priyanka", "Declan", "Yusuf",
          "Hana", "Matteo", "Beatriz", "Kwame", "Ines", "Rafferty", "Soraya", "Linnea"]
PLACES = ["the ferry yard", "Alder Street", "the old cannery", "Millbrook", "the harbour",
          "Quarry Road", "Fenwick", "the north market", "Castlegate", "Ravensworth"]
TITLES = ["The Salt Road", "Paper Lanterns", "A House of Wind", "The Long Orchard",
          "Nine Winters", "The Glass Ferry", "Small Hours", "The Copper Field"]
DISHES = ["lamb tagine", "mushroom risotto", "shakshuka", "pho", "paella", "pierogi",
          "jollof rice", "bibimbap"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]
CITIES = ["Lisbon", "Kraków", "Hanoi", "Oaxaca", "Tbilisi", "Porto", "Seville", "Kyoto"]


@dataclass
class _Fact:
    """What someone says (each turn in a session of its own, in order: every turn is
    evidence) and the question asked of it later."""

    category: str
    turns: list[str]
    question: str
    answer: str


def _pick(rng: random.Random, options: list[str]) -> str:
    return rng.choice(options)


# ---- multi-hop: two turns joined by a name the question does not say -----------------------
def _fixer(rng: random.Random, me: str, x: str) -> _Fact:
    place = rng.choice(PLACES)
    thing = rng.choice(["bike", "boiler", "washing machine", "fence", "car's brakes"])
    return _Fact("multi-hop", [
        _pick(rng, [f"{x} came round and fixed our {thing} on Saturday, wouldn't take a penny",
                    f"Finally got the {thing} sorted, {x} from two doors down did it in an hour",
                    f"Our {thing} works again! {x} spent a whole Sunday on it"]),
        _pick(rng, [f"Guess who I ran into, {x}! Working at {place} these days, apparently",
                    f"{x} says the new job at {place} is going well, long shifts though",
                    f"Apparently {x} started at {place} last month"]),
    ], _pick(rng, [f"Where does the person who repaired {me}'s {thing} work now?",
                   f"Where's the neighbour who sorted out {me}'s {thing} employed these days?"]),
        place)


def _author(rng: random.Random, me: str, x: str) -> _Fact:
    month = rng.choice(MONTHS)
    title = rng.choice(TITLES)
    return _Fact("multi-hop", [
        _pick(rng, [f"I'm halfway through {title} and I can't put it down",
                    f"Stayed up till two reading {title}, it's so good",
                    f"You have to read {title}, I finished it in three evenings"]),
        _pick(rng, [f"{x} is doing a reading at the library in {month}! The one who wrote "
                    f"{title}", f"Saw a poster: {x}, author of {title}, signing books in {month}"]),
    ], _pick(rng, [f"When can {me} meet the writer of the novel that kept them up at night?",
                   f"When is the author of the book {me} couldn't stop reading coming to town?"]),
        month)


def _gift(rng: random.Random, me: str, x: str) -> _Fact:
    hobby, gift = rng.choice([("pottery", "a kick wheel"), ("birdwatching", "binoculars"),
                              ("climbing", "a chalk bag"), ("baking", "a stand mixer"),
                              ("chess", "a wooden chess set")])
    rel = rng.choice(["sister", "cousin", "brother", "aunt"])
    return _Fact("multi-hop", [
        _pick(rng, [f"My {rel} {x} has gone completely mad for {hobby}",
                    f"{x}, my {rel}, spends every weekend on {hobby} now"]),
        _pick(rng, [f"Got {x} {gift} for the birthday, fingers crossed",
                    f"Wrapped up {gift} for {x} last night, the party is Sunday"]),
    ], _pick(rng, [f"What present did {me} buy for the relative who's into {hobby}?",
                   f"What did {me} get their {hobby}-obsessed {rel}?"]), gift)


def _suggested(rng: random.Random, me: str, x: str) -> _Fact:
    dish = rng.choice(DISHES)
    spot = rng.choice(["Casa Lume", "The Brass Kettle", "Little Saigon Kitchen",
                       "Osteria Nove", "Mama Ayo's", "Kolbe's"])
    return _Fact("multi-hop", [
        _pick(rng, [f"{x} at work keeps telling me to try {spot}",
                    f"My colleague {x} swears {spot} is the best in town"]),
        _pick(rng, [f"Finally went to {spot}, had the {dish}, unreal",
                    f"We tried {spot} on Friday, the {dish} was worth the wait"]),
    ], _pick(rng, [f"What did {me} order at the restaurant a coworker recommended?",
                   f"What dish did {me} have at the place their colleague kept raving about?"]),
        dish)


def _trip(rng: random.Random, me: str, x: str) -> _Fact:
    city = rng.choice(CITIES)
    mishap = rng.choice(["sprained an ankle", "lost a passport", "got food poisoning",
                         "missed the flight home"])
    return _Fact("multi-hop", [
        _pick(rng, [f"Booked it! {x} and I are off to {city} in the spring",
                    f"{x} talked me into a week in {city}, flights are booked"]),
        _pick(rng, [f"Poor {x} {mishap}, what a mess",
                    f"Bit of a disaster, {x} {mishap} on the second day"]),
    ], _pick(rng, [f"What went wrong for the friend {me} travelled to {city} with?",
                   f"What happened to {me}'s travel companion on the {city} trip?"]), mishap)


def _teacher(rng: random.Random, me: str, x: str) -> _Fact:
    kid = rng.choice(["Mia", "Leo", "Zara", "Theo", "Nina", "Omar"])
    play = rng.choice(["The Wizard of Oz", "Peter Pan", "Annie", "a pirate musical"])
    return _Fact("multi-hop", [
        _pick(rng, [f"{kid}'s new teacher is {x}, {kid} adores her already",
                    f"Met {x} at parents' evening, she's {kid}'s class teacher this year"]),
        _pick(rng, [f"{x} is directing {play} for the whole school, rehearsals every Tuesday",
                    f"So {x} is putting on {play} in December, she's roped everyone in"]),
    ], _pick(rng, [f"Which show is {kid}'s teacher staging?",
                   f"What production is the woman who teaches {me}'s kid putting on?"]), play)


BRIDGES = [_fixer, _author, _gift, _suggested, _trip, _teacher]


# ---- open: inference from what was said in passing ---------------------------------------
INFERENCES: list[tuple[list[str], list[list[str]], str]] = [
    (["Is {me} a morning person?", "Would {me} mind an early start?"],
     [["up at five again for a swim, I love the empty pool",
       "Sunrise run this morning, best part of my day"],
      ["by nine at night I'm done, honestly, can barely keep my eyes open",
       "I was asleep before ten again, rock and roll"]], "yes"),
    (["Would {me} enjoy a big loud party?", "Is {me} keen on crowds?"],
     [["skipped the festival, too many people for me",
       "left the wedding reception early, the noise was getting to me"],
      ["a quiet night in with a film is my idea of heaven",
       "I recharge on my own, a whole weekend with no plans sounds perfect"]], "probably not"),
    (["Is money tight for {me} at the moment?", "Could {me} afford a holiday right now?"],
     [["the car repair ate our savings, so no holiday this year",
       "had to dip into the emergency fund again, the roof needed patching"],
      ["picking up extra shifts on weekends to make rent",
       "cancelled the gym and the streaming, every bit counts right now"]], "it seems tight"),
    (["Would {me} be handy with a leaking pipe?", "Could {me} help with plumbing?"],
     [["replaced the kitchen tap myself, took twenty minutes",
       "sorted the bathroom drain on my own, no need to call anyone"],
      ["I did two years as a plumber's apprentice before uni",
       "my dad ran a plumbing business, I grew up carrying his toolbox"]], "yes"),
    (["Is {me} likely to get another dog?", "Does {me} want a pet again?"],
     [["the house is so quiet without Biscuit, I keep listening for his paws",
       "still miss walking Biscuit every evening"],
      ["been scrolling the rescue centre website again",
       "went to look at the shelter on Saturday, just to look, obviously"]], "probably"),
    (["Does {me} enjoy cooking?", "Would {me} like a cookery class?"],
     [["spent all Sunday making fresh pasta, flour everywhere",
       "tried a twelve-spice curry from scratch last night"],
      ["my happy place is the kitchen with music on",
       "bought a second-hand cast iron pan, I'm unreasonably excited"]], "yes"),
    (["Is {me} settling in well at the new flat?", "Does {me} like the new place?"],
     [["the neighbours brought round a cake on our first day",
       "found a lovely bakery on the corner, we go every Saturday"],
      ["the light in the living room in the afternoon is gorgeous",
       "finally unpacked the last box and it feels like home"]], "yes"),
]


# ---- single: facts said once, asked plainly --------------------------------------------
def _singles(rng: random.Random, me: str) -> list[_Fact]:
    car = rng.choice(["a green Skoda", "an old Volvo estate", "a red Fiat 500", "a Nissan Leaf"])
    band = rng.choice(["a swing band", "a choir", "a punk covers band", "a folk trio"])
    allergy = rng.choice(["peanuts", "shellfish", "cats", "penicillin"])
    return [
        _Fact("single", [_pick(rng, [f"We finally replaced the van, got {car}",
                                     f"Picked up {car} from the garage, our new runaround"])],
              _pick(rng, [f"What car does {me} drive now?", f"What did {me} buy to replace the van?"]),
              car),
        _Fact("single", [_pick(rng, [f"I joined {band}, rehearsals on Thursdays",
                                     f"Singing with {band} now, first gig in May"])],
              _pick(rng, [f"What group did {me} join?", f"Which band is {me} part of?"]), band),
        _Fact("single", [_pick(rng, [f"careful with the snacks, I'm allergic to {allergy}",
                                     f"turns out I react badly to {allergy}, the doctor confirmed it"])],
              _pick(rng, [f"What is {me} allergic to?", f"What does {me} need to avoid?"]), allergy),
    ]


SMALL_TALK = [
    "Morning! How's your week going?", "Not bad, the usual chaos", "Ha, same here",
    "It's been raining all week, I'm sick of it", "Sun's finally out, I'm taking lunch outside",
    "Work is busy but fine", "Did you watch the match last night?", "No, I fell asleep",
    "Sorry, slow reply, long day", "Anyway, how are you?", "Good good, tired", "Same old",
    "What are you up to this weekend?", "Nothing much, maybe a walk",
    "I need a holiday so badly", "Tell me about it", "Coffee later this week?",
    "Can't Thursday, maybe Friday?", "The traffic this morning was unreal",
    "My phone died halfway through the day, nightmare", "Haha yes", "That's so funny",
    "Oh no, hope it gets better", "Fingers crossed", "Honestly the week flew by",
    "Had the best sandwich at lunch", "I keep forgetting to call my mum back",
    "The cat knocked my coffee over again", "We should plan something soon",
    "Long week at work, glad it's Friday", "Back to work tomorrow, ugh",
]



def _conversation(rng: random.Random, index: int) -> Conversation:
    (a, _), (b, _) = rng.sample(FRIENDS, 2)
    people = rng.sample(OTHERS, len(OTHERS))
    facts: list[tuple[str, _Fact]] = []
    bridges = rng.sample(BRIDGES, len(BRIDGES))
    for i, bridge in enumerate(bridges):
        me = (a, b)[i % 2]
        facts.append((me, bridge(rng, me, people[i])))
    for i, (asks, parts, answer) in enumerate(rng.sample(INFERENCES, 5)):
        me = (b, a)[i % 2]
        turns = [_pick(rng, p) for p in parts]
        facts.append((me, _Fact("open", turns, rng.choice(asks).format(me=me), answer)))
    for me in (a, b):
        facts.extend((me, f) for f in _singles(rng, me))
    n_sessions = rng.randint(14, 18)
    start = datetime(2025, 1, 6, 19, tzinfo=UTC) + timedelta(days=rng.randint(0, 120))
    slots: list[list[tuple[str, str, int, int]]] = [[] for _ in range(n_sessions)]
    for f_index, (me, fact) in enumerate(facts):
        if len(fact.turns) > 1:
            first = rng.randint(0, n_sessions // 2 - 1)
            later = rng.randint(first + 2, n_sessions - 1)
            where = [first, later]
        else:
            where = [rng.randint(0, n_sessions - 1)]
        for t_index, session in enumerate(where):
            slots[session].append((me, fact.turns[t_index], f_index, t_index))
    conv = Conversation(name=f"bridge-{index}")
    located: dict[tuple[int, int], int] = {}
    when = start
    for session in range(n_sessions):
        when += timedelta(days=rng.randint(3, 11), minutes=rng.randint(-90, 90))
        if conv.rows:
            conv.rows.append(Row("marker", "session_clear", when))
        said = slots[session]
        rng.shuffle(said)
        speaker = rng.choice((a, b))
        lines: list[tuple[str, str, tuple[int, int] | None]] = []
        for me, text, f_index, t_index in said:
            for _ in range(rng.randint(1, 3)):
                lines.append((speaker, rng.choice(SMALL_TALK), None))
                speaker = b if speaker == a else a
            lines.append((me, text, (f_index, t_index)))
            speaker = b if me == a else a
        for _ in range(rng.randint(2, 5)):
            lines.append((speaker, rng.choice(SMALL_TALK), None))
            speaker = b if speaker == a else a
        for offset, (who, text, key) in enumerate(lines):
            role = "user" if who == a else "assistant"
            conv.rows.append(Row(role, f"{who}: {text}", when + timedelta(minutes=offset)))
            if key is not None:
                located[key] = len(conv.rows) - 1
    for f_index, (_, fact) in enumerate(facts):
        evidence = [located[(f_index, t)] for t in range(len(fact.turns))]
        conv.questions.append(Question(fact.question, fact.category, evidence, fact.answer))
    return conv


def build(seed: int = 5, conversations: int = 6) -> list[Conversation]:
    rng = random.Random(seed)
    return [_conversation(rng, i) for i in range(conversations)]


if __name__ == "__main__":
    for conv in build(5)[:1]:
        print(len(conv.rows), "rows,", len(conv.questions), "questions")
        for q in conv.questions:
            print(f"- [{q.category}] {q.text}")
            for i in q.evidence:
                print(f"    {i}: {conv.rows[i].content}")
