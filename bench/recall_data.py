"""A labelled multi-session benchmark for episodic recall (bench/bench_recall.py).

    from recall_data import build
    conversations = build(seed=12)

Each `Conversation` is one person's chat with their assistant over several dated sessions:
user and assistant rows exactly as nixx's buffer stores them (a ``marker`` row between
sessions, as `/clear` writes), each with the time it was said. `questions` are what that
person later asks of their memory, each labelled with the rows (0-based positions in
`rows`) that hold the answer — every one of them is an evidence row, and R@k is the share
of evidence rows found in the top k (as on LoCoMo).

Everything is generated from templates with varied phrasings by a seeded `random.Random`,
so the same seed gives the same benchmark byte for byte. What makes it hard on purpose:

- filler: greetings, thanks, long assistant answers on unrelated everyday and technical
  topics, which share the common words of every question;
- distractors: rows that share the content words of a question but do not answer it
  (the neighbour's son also plays the violin, a key lime pie, an API key);
- facts that change over time (a new job, a new car): the question asks for the current
  value, and the old row shares the same words;
- short answers: the assistant asks, the user answers "yes, Tuesday" — the answer row
  alone says nothing, it needs the question before it (both rows are evidence);
- paraphrase questions share no content word with their evidence (checked by the bench
  with the store's own full-text query);
- multi-hop questions need two rows from different sessions;
- temporal questions ask when something happened, or what happened in a month or the
  week after an event — the date is only in the rows' `created_at`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

CATEGORIES = ("single", "paraphrase", "multi-hop", "temporal")


@dataclass
class Row:
    role: str  # user | assistant | marker
    content: str
    created_at: datetime


@dataclass
class Question:
    text: str
    category: str
    evidence: list[int]  # positions in Conversation.rows
    answer: str


@dataclass
class Conversation:
    name: str
    rows: list[Row] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)


# ---- value pools -----------------------------------------------------------------------
USERS = ["Maya", "Tom", "Priya", "Jonas", "Elena", "Sam", "Aiko", "Marco", "Lena", "Dev"]
KIDS = [
    ("Ella", "daughter", "she", "her"),
    ("Noah", "son", "he", "his"),
    ("Zoe", "daughter", "she", "her"),
    ("Leo", "son", "he", "his"),
    ("Mila", "daughter", "she", "her"),
    ("Finn", "son", "he", "his"),
    ("Ines", "daughter", "she", "her"),
    ("Theo", "son", "he", "his"),
]
INSTRUMENTS = ["violin", "cello", "piano", "trumpet", "flute", "clarinet", "drums"]
PARTNERS = ["Alex", "Jordan", "Chris", "Robin", "Kim", "Sasha", "Nico"]
SIBLINGS = [
    ("sister", "Ana"),
    ("brother", "Luis"),
    ("sister", "Hanna"),
    ("brother", "Omar"),
    ("sister", "Greta"),
    ("brother", "Karl"),
]
SIB_JOBS = ["nurse", "pilot", "architect", "vet", "teacher", "firefighter"]
CITIES = [
    "Lisbon",
    "Porto",
    "Valencia",
    "Lyon",
    "Munich",
    "Krakow",
    "Ghent",
    "Bergen",
    "Turin",
    "Edinburgh",
]
DOG_BREEDS = ["beagle", "border collie", "labrador", "dachshund", "corgi", "greyhound"]
PET_NAMES = ["Biscuit", "Pepper", "Miso", "Juniper", "Rocket", "Toffee", "Olive", "Bruno"]
PLACES = ["boathouse", "garden shed", "cabin", "garage", "allotment hut", "beach hut"]
HIDES = [
    ("blue", "flowerpot"),
    ("green", "watering can"),
    ("red", "brick by the door"),
    ("grey", "stone frog"),
    ("yellow", "doormat"),
    ("white", "bird bath"),
]
ALLERGENS = [
    ("shellfish", "prawns"),
    ("peanuts", "satay"),
    ("sesame", "tahini"),
    ("kiwi", "fruit salad"),
    ("hazelnuts", "praline"),
]
JOBS = [
    ("data analyst", "Brightline"),
    ("backend developer", "Norrsken Labs"),
    ("product manager", "Tidewater"),
    ("UX designer", "Cobalt Health"),
    ("QA engineer", "Fennel Systems"),
    ("site reliability engineer", "Arcadia Cloud"),
    ("technical writer", "Lumen Press"),
    ("machine learning engineer", "Okapi AI"),
]
CARS = [
    "Toyota Corolla",
    "VW Golf",
    "Honda Civic",
    "Skoda Octavia",
    "Mazda 3",
    "Ford Focus",
    "Renault Clio",
    "Kia Ceed",
]
NEW_CARS = ["Tesla Model 3", "Hyundai Ioniq 5", "Kia EV6", "VW ID.3", "Polestar 2", "Nissan Leaf"]
SPORTS = [
    ("bouldering", "climbing gym"),
    ("rowing", "rowing club"),
    ("fencing", "fencing club"),
    ("salsa", "dance studio"),
    ("judo", "dojo"),
    ("ultimate frisbee", "frisbee team"),
]
BOOKS = [
    ("Piranesi", "Susanna Clarke"),
    ("The Overstory", "Richard Powers"),
    ("Klara and the Sun", "Kazuo Ishiguro"),
    ("Project Hail Mary", "Andy Weir"),
    ("The Dispossessed", "Ursula K. Le Guin"),
    ("Station Eleven", "Emily St. John Mandel"),
    ("A Gentleman in Moscow", "Amor Towles"),
    ("The Name of the Rose", "Umberto Eco"),
]
COWORKERS = ["Farid", "Bea", "Ingrid", "Tobias", "Ruth", "Kenji", "Olga", "Marcel"]
RESTAURANTS = [
    "Casa Lupo",
    "the Green Fig",
    "Sakura Bar",
    "Osteria Nove",
    "Bao House",
    "El Faro",
    "the Copper Pot",
    "Little Saigon",
    "Taverna Kos",
    "Dosa Corner",
]
FILMS = [
    "Past Lives",
    "Dune Part Two",
    "Perfect Days",
    "Anatomy of a Fall",
    "Oppenheimer",
    "The Zone of Interest",
    "Poor Things",
    "Aftersun",
    "The Holdovers",
]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
COLOURS = ["sage green", "terracotta", "navy blue", "mustard yellow", "off-white"]
ROOMS = ["bedroom", "hallway", "kitchen", "living room", "study"]
PLANTS = ["monstera", "fiddle-leaf fig", "snake plant", "olive tree", "pothos"]
TRIP_CITIES = ["Kyoto", "Reykjavik", "Marrakech", "Vancouver", "Seville", "Hanoi", "Tbilisi"]
DOCTORS = ["dentist", "dermatologist", "physiotherapist", "eye doctor", "GP"]
LANGS = ["Portuguese", "Japanese", "Italian", "Dutch", "Korean", "Greek"]
APPS = ["Duolingo", "a tutor on italki", "Babbel", "an evening class at the library"]
DISHES = [
    "shakshuka",
    "mushroom risotto",
    "lamb tagine",
    "pad see ew",
    "dal makhani",
    "fish tacos",
    "ratatouille",
]
TEACHERS = ["Ms Okafor", "Mr Lindqvist", "Ms Duarte", "Mr Abbott", "Ms Novak", "Mr Haddad"]
STREETS = ["Elm Row", "Harbour Lane", "Quarry Street", "Linden Avenue", "Mill Road", "Chapel Close"]
GIFTS = [
    "a record player",
    "a pottery class",
    "a weekend in a spa hotel",
    "noise-cancelling headphones",
    "a kayak lesson voucher",
    "an espresso machine",
]
RACES = [
    ("Berlin", "half marathon"),
    ("Lisbon", "10k"),
    ("Amsterdam", "half marathon"),
    ("Copenhagen", "marathon"),
    ("Vienna", "half marathon"),
]
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]


# ---- filler ----------------------------------------------------------------------------
GREETINGS = [
    "morning! coffee first, then let's get going",
    "hey, I'm back",
    "hi again",
    "ok I have a bit of time tonight",
    "good evening, quick one before bed",
    "hello! long day but I want to get a few things sorted",
    "hey there, what's up",
    "back at my desk",
]
GREETING_REPLIES = [
    "Good morning! What's on your list today?",
    "Welcome back. What would you like to work on?",
    "Hi! Ready when you are.",
    "Sure, what can I help with?",
    "Evening! Go ahead.",
    "Hello — happy to help. Where do you want to start?",
]
ACKS = [
    "thanks!",
    "ok, makes sense",
    "perfect, thank you",
    "haha fair enough",
    "got it",
    "nice, that helps",
    "cool",
    "right, I'll try that",
    "great",
    "ok",
]
ACK_REPLIES = [
    "You're welcome!",
    "Glad it helps.",
    "Any time.",
    "Let me know how it goes.",
    "Sure thing.",
    "Happy to help — shout if anything else comes up.",
]
BYES = [
    "that's all for today, thanks",
    "ok gotta run",
    "thanks, talk later",
    "night!",
    "I'll stop here for now",
]
BYE_REPLIES = ["Talk soon!", "Good night!", "See you next time.", "Have a good one!"]

# (question, answer) pairs on everyday and technical topics: realistic noise that shares
# the common words (week, day, start, new, time, home, work) with the real questions
FILLER = [
    (
        "how do I reverse a list in python without modifying the original?",
        "Use slicing: `reversed_list = items[::-1]` returns a new list. `reversed(items)` gives an "
        "iterator if you only need to loop once, and `items.reverse()` reverses in place.",
    ),
    (
        "what's the difference between a process and a thread?",
        "A process has its own memory space; threads inside one process share memory. Threads "
        "are cheaper to start and communicate through shared state, processes are isolated and "
        "communicate through pipes, sockets or files.",
    ),
    (
        "can you suggest a quick lunch I can take to work?",
        "A grain bowl keeps well: cooked farro or rice, roasted vegetables, a boiled egg and a "
        "lemon-tahini dressing in a separate jar. It takes ten minutes if you batch the grains.",
    ),
    (
        "why does my sourdough come out flat?",
        "Usually the starter is not active enough or the dough is over-proofed. Feed the starter "
        "so it doubles in 4-6 hours, and try a shorter bulk ferment in a warm kitchen.",
    ),
    (
        "explain git rebase like I'm five",
        "Rebase picks up your commits and replays them on top of the newest version of the "
        "branch, as if you had started your work from there. The history becomes a straight line.",
    ),
    (
        "what's a good stretching routine after a long day at the desk?",
        "Try five minutes: neck rolls, a doorway chest stretch, seated spinal twists, a hip "
        "flexor lunge and a forward fold. Hold each for 30 seconds and breathe slowly.",
    ),
    (
        "how long should I boil an egg for a runny yolk?",
        "Six and a half minutes from boiling water, then straight into cold water for a minute. "
        "Seven minutes gives a jammy yolk.",
    ),
    (
        "is it worth switching from bash to zsh?",
        "If you like plugins, better completion and themes, zsh with a light framework is nice. "
        "For scripts, keep writing POSIX sh or bash so they run everywhere.",
    ),
    (
        "what's the best way to learn touch typing?",
        "Fifteen minutes a day on a site like keybr or monkeytype, eyes on the screen, accuracy "
        "before speed. Most people are faster than before after three to four weeks.",
    ),
    (
        "recommend a podcast for my commute",
        "For something light, try 'No Such Thing As A Fish'; for long-form interviews, 'The "
        "Ezra Klein Show'; for history, 'The Rest Is History'.",
    ),
    (
        "how do I get rid of fruit flies in the kitchen?",
        "Put out a small glass of cider vinegar with a drop of dish soap, take out the compost "
        "daily and rinse bottles before recycling. They are gone within a week or so.",
    ),
    (
        "what does HTTP 429 mean?",
        "Too Many Requests: you hit a rate limit. Back off and retry after the time given in "
        "the Retry-After header, ideally with exponential backoff and jitter.",
    ),
    (
        "how often should I water a cactus?",
        "Every two to three weeks in summer, roughly once a month in winter. Water deeply and "
        "let the soil dry out completely in between.",
    ),
    (
        "give me a 20 minute bodyweight workout",
        "Four rounds: 12 squats, 10 push-ups, 12 lunges per leg, 30 seconds plank, 15 glute "
        "bridges. Rest a minute between rounds.",
    ),
    ("what's the capital of Australia again?", "Canberra — not Sydney, which people often guess."),
    (
        "how do I make my laptop battery last longer?",
        "Lower the screen brightness, close browser tabs you don't need, keep the charge between "
        "20 and 80 percent when you can, and check which apps use energy in the background.",
    ),
    (
        "any tips for sleeping better?",
        "Keep a fixed wake-up time, get daylight in the morning, no caffeine after lunch, and "
        "keep the bedroom cool and dark. Screens off half an hour before bed helps many people.",
    ),
    (
        "what's a good name for a wifi network?",
        "Some favourites: 'Pretty Fly for a WiFi', 'LAN Solo', 'The Promised LAN', 'Bill Wi the "
        "Science Fi'.",
    ),
    (
        "how do I centre a div?",
        "With flexbox on the parent: `display: flex; justify-content: center; align-items: "
        "center;`. With grid: `display: grid; place-items: center;`.",
    ),
    (
        "should I use tabs or spaces?",
        "Follow the language's convention: four spaces in Python (PEP 8), tabs in Go (gofmt). "
        "Consistency within a project matters most.",
    ),
    (
        "what's the weather usually like in late spring up north?",
        "Mild and changeable: 12-18 degrees in the day, cool nights, and showers that come and go. "
        "Layers and a light rain jacket are the safe bet.",
    ),
    (
        "how do I remove a red wine stain from a carpet?",
        "Blot (don't rub), pour a little cold water, then a paste of baking soda and water; let "
        "it dry and vacuum. Dish soap with hydrogen peroxide works on light carpets.",
    ),
    (
        "what's the difference between baking soda and baking powder?",
        "Baking soda is pure sodium bicarbonate and needs an acid to react; baking powder "
        "contains its own acid, so it works with any liquid.",
    ),
    (
        "can you write a regex for an email address?",
        "A practical one: `^[^@\\s]+@[^@\\s]+\\.[^@\\s]+$`. Perfect validation by regex is not "
        "possible; send a confirmation mail instead.",
    ),
    (
        "how many cups of coffee a day is too many?",
        "For most adults up to about 400 mg of caffeine a day — roughly four cups of filter "
        "coffee — is considered safe. Less if it affects your sleep.",
    ),
    (
        "what's a good board game for four adults?",
        "Try Wingspan for something calm, Codenames for a party mood, or Azul for a quick, "
        "pretty abstract game. Ticket to Ride is a safe classic.",
    ),
    (
        "how do I set up a cron job that runs every monday?",
        "`0 9 * * 1 /path/to/script.sh` runs it at 09:00 every Monday. Use `crontab -e` to add "
        "it and make sure the script is executable.",
    ),
    (
        "what should I pack for a weekend camping trip?",
        "Tent, sleeping bag and mat, head torch, stove and gas, a pot, water filter, layers, a "
        "rain jacket, first-aid kit and food that needs little cooking.",
    ),
    (
        "why is my docker image so big?",
        "Probably build tools and caches left in the final layer. Use a multi-stage build, a "
        "slim base image, and clean package caches in the same RUN step.",
    ),
    (
        "how do I politely decline a meeting?",
        "Something like: 'Thanks for the invite — I can't make this one. Could you share the "
        "notes, or let me know if there is something you need from me beforehand?'",
    ),
]

# rows that share words with the questions but answer none of them (per fact key)
DISTRACTORS = {
    "instrument": [
        ("user", "the neighbour's son practises the trumpet every evening, the walls are thin"),
        ("user", "we went to a concert in the park, a string quartet playing Vivaldi"),
    ],
    "key": [
        ("user", "I need to rotate the API key for the staging server before friday"),
        (
            "assistant",
            "Store the new API key in your secrets manager and revoke the old key "
            "once every service has picked up the new one.",
        ),
        ("user", "made a key lime pie for the bake sale, it vanished in minutes"),
    ],
    "allergy": [
        ("user", "my colleague sneezes all spring, hay fever is brutal this year"),
    ],
    "job": [
        ("user", "my friend got a new job at a bank, she seems happy"),
        (
            "assistant",
            "Starting a new job is a big change — it usually takes a few months to feel settled.",
        ),
    ],
    "car": [
        ("user", "the car wash on the corner finally reopened"),
        ("user", "my neighbour keeps parking his van in front of our car"),
    ],
    "sibling": [
        ("user", "Alex's cousin moved abroad last year and loves it"),
    ],
    "pet": [
        ("user", "there's a cat that sleeps on our garden wall every afternoon"),
        (
            "assistant",
            "Cats love warm walls — it may belong to a neighbour, or it may be a "
            "stray worth mentioning to a local shelter.",
        ),
    ],
    "book": [
        ("user", "I donated a box of old books to the library"),
    ],
    "restaurant": [
        ("user", "the restaurant downstairs from the office closed down"),
    ],
    "film": [
        ("user", "there's a film festival in town but the tickets sold out"),
    ],
    "doctor": [
        ("user", "my mum has a doctor's appointment and I'm driving her"),
    ],
    "trip": [
        ("user", "a friend just got back from a trip to Iceland and won't stop talking about it"),
    ],
}


# what people wrap a fact in: the fact is one sentence of a chatty message
LEADS = [
    "sorry, crazy week. ",
    "oh before I forget: ",
    "random update: ",
    "so, ",
    "quick thing, ",
    "anyway, ",
    "ha, guess what: ",
    "ok so ",
    "news from home: ",
]
TAILS = [
    " anyway, how are you?",
    " anyway, back to work.",
    " life is busy lol",
    " can't believe it's already the weekend.",
    " also it's freezing today.",
    " not much else going on.",
    " what a week.",
]

DISTRACTOR_REPLIES = [
    "Ha, I know the feeling.",
    "Oh, interesting!",
    "That sounds nice.",
    "Good to know.",
    "Fair enough!",
]


# ---- facts ---------------------------------------------------------------------------
# An episode is a list of (role, text) turns; a text starting with "*" is an evidence
# turn (the star is removed). Questions name the episode's evidence by default; multi-hop
# and temporal-by-period questions are built in `_conversation`.


class _Gen:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def pick(self, items: list[str] | list[tuple[str, ...]] | list[object]) -> object:
        return self.rng.choice(items)


def _persona(rng: random.Random, index: int) -> dict[str, str]:
    kid = rng.choice(KIDS)
    sib = rng.choice(SIBLINGS)
    job_old, job_new = rng.sample(JOBS, 2)
    place = rng.choice(PLACES)
    hide = rng.choice(HIDES)
    allergen = rng.choice(ALLERGENS)
    sport = rng.choice(SPORTS)
    book = rng.choice(BOOKS)
    trip = rng.choice(TRIP_CITIES)
    race = rng.choice(RACES)
    return {
        "user": USERS[index % len(USERS)],
        "kid": kid[0],
        "kid_rel": kid[1],
        "kid_he": kid[2],
        "kid_his": kid[3],
        "instr": rng.choice(INSTRUMENTS),
        "partner": rng.choice(PARTNERS),
        "sib_rel": sib[0],
        "sib": sib[1],
        "sib_job": rng.choice(SIB_JOBS),
        "sib_city": rng.choice(CITIES),
        "breed": rng.choice(DOG_BREEDS),
        "pet": rng.choice(PET_NAMES),
        "place": place,
        "hide_col": hide[0],
        "hide_obj": hide[1],
        "allergen": allergen[0],
        "allergen_dish": allergen[1],
        "job_old": job_old[0],
        "co_old": job_old[1],
        "job_new": job_new[0],
        "co_new": job_new[1],
        "car_old": rng.choice(CARS),
        "car_new": rng.choice(NEW_CARS),
        "sport": sport[0],
        "sport_place": sport[1],
        "book": book[0],
        "author": book[1],
        "coworker": rng.choice(COWORKERS),
        "colour": rng.choice(COLOURS),
        "room": rng.choice(ROOMS),
        "plant": rng.choice(PLANTS),
        "trip": trip,
        "doctor": rng.choice(DOCTORS),
        "day": rng.choice(DAYS),
        "lang": rng.choice(LANGS),
        "app": rng.choice(APPS),
        "dish": rng.choice(DISHES),
        "plumber_day": rng.choice(DAYS),
        "kid_age": str(rng.randint(6, 11)),
        "bday_day": str(rng.randint(3, 27)),
        "teacher": rng.choice(TEACHERS),
        "street": rng.choice(STREETS),
        "gift": rng.choice(GIFTS),
        "race_city": race[0],
        "race": race[1],
        "years": str(rng.randint(4, 15)),
    }


@dataclass
class _Episode:
    key: str
    turns: list[tuple[str, str]]
    # (category, question, answer); evidence = the starred turns
    questions: list[tuple[str, str, str]] = field(default_factory=list)
    order: int = 0  # 0 anywhere, 1 early sessions, 2 late sessions
    after: str | None = None  # key of an episode that must be in an earlier session


def _episodes(rng: random.Random, p: dict[str, str]) -> list[_Episode]:
    """The fact episodes of one persona: each a few turns with their questions."""
    c = rng.choice

    def f(text: str) -> str:
        return text.format(**p)

    eps: list[_Episode] = []
    eps.append(
        _Episode(
            "instrument",
            [
                (
                    "user",
                    f(
                        c(
                            [
                                "*my {kid_rel} {kid} started {instr} lessons this week, {kid_he}'s so excited",
                                "*big news at home: {kid} has begun {instr} lessons with a teacher down the road",
                                "*{kid} had {kid_his} first {instr} lesson on saturday and hasn't put it down since",
                            ]
                        )
                    ),
                ),
                (
                    "assistant",
                    f(
                        c(
                            [
                                "That's lovely! Starting young makes a big difference. Short daily practice — ten "
                                "or fifteen minutes — works better than one long session a week.",
                                "How exciting. Tip for parents: a fixed practice slot, right after school or "
                                "dinner, turns it into a habit rather than a negotiation.",
                            ]
                        )
                    ),
                ),
                (
                    "user",
                    c(
                        [
                            "we'll see how long the enthusiasm lasts haha",
                            "the neighbours may feel differently",
                            "fingers crossed it sticks",
                        ]
                    ),
                ),
            ],
            [
                (
                    "single",
                    f(
                        c(
                            [
                                "what lessons did {kid} start?",
                                "what did {kid} start taking lessons in?",
                            ]
                        )
                    ),
                    f("{instr}"),
                ),
                (
                    "paraphrase",
                    c(
                        [
                            "which instrument is my kid learning?",
                            "what does my child practise playing these days?",
                            "what is the little one learning to play?",
                        ]
                    ),
                    f("{instr}"),
                ),
                (
                    "temporal",
                    f(
                        c(
                            [
                                "when did {kid} start {instr} lessons?",
                                "when did {kid} have the first {instr} lesson?",
                            ]
                        )
                    ),
                    "session date",
                ),
            ],
        )
    )
    eps.append(
        _Episode(
            "key",
            [
                (
                    "user",
                    f(
                        c(
                            [
                                "*note to self: the spare key to the {place} is hidden under the {hide_col} "
                                "{hide_obj}",
                                "*if I forget again, the spare {place} key is under the {hide_col} {hide_obj}",
                            ]
                        )
                    ),
                ),
                (
                    "assistant",
                    "Noted — I'll remember where the spare key is in case you ask later.",
                ),
            ],
            [
                (
                    "single",
                    f(
                        c(
                            [
                                "where did I say the {place} key is hidden?",
                                "where is the spare key for the {place}?",
                            ]
                        )
                    ),
                    f("{hide_col} {hide_obj}"),
                ),
                (
                    "paraphrase",
                    c(
                        [
                            "where did I stash the thing that opens the door out back?",
                            "if I'm locked out, where do I look to get in?",
                        ]
                    ),
                    f("{hide_col} {hide_obj}"),
                ),
            ],
        )
    )
    eps.append(
        _Episode(
            "allergy",
            [
                (
                    "user",
                    f(
                        c(
                            [
                                "*got the test results back: I'm allergic to {allergen}, so no more {allergen_dish} "
                                "for me",
                                "*the clinic confirmed it, {allergen} allergy. explains the hives last month",
                            ]
                        )
                    ),
                ),
                (
                    "assistant",
                    f(
                        "That's useful to know. Read labels carefully — {allergen} hides in "
                        "sauces and ready meals — and tell restaurants when you order."
                    ),
                ),
            ],
            [
                (
                    "single",
                    f(c(["what am I allergic to?", "what did the allergy test show?"])),
                    f("{allergen}"),
                ),
                (
                    "paraphrase",
                    c(
                        [
                            "which food do I have to avoid for medical reasons?",
                            "what ingredient makes me ill?",
                        ]
                    ),
                    f("{allergen}"),
                ),
            ],
        )
    )
    eps.append(
        _Episode(
            "sibling_job",
            [
                (
                    "user",
                    f(
                        c(
                            [
                                "*my {sib_rel} {sib} just qualified as a {sib_job}, we're all so proud",
                                "*{sib}, my {sib_rel}, finally finished training, {sib} is a {sib_job} now",
                            ]
                        )
                    ),
                ),
                ("assistant", "Congratulations to them! That takes years of work."),
            ],
            [
                ("single", f("what does my {sib_rel} {sib} do for a living?"), f("{sib_job}")),
            ],
            order=1,
        )
    )
    eps.append(
        _Episode(
            "sibling_city",
            [
                (
                    "user",
                    f(
                        c(
                            [
                                "*{sib} is moving to {sib_city} next month, got offered a post there",
                                "*so {sib} has decided: {sib_city} it is, the move is in a few weeks",
                            ]
                        )
                    ),
                ),
                ("assistant", f("{sib_city} is a great place to live. Will you visit often?")),
                ("user", c(["definitely, it's a cheap flight", "once they're settled, yes"])),
            ],
            [
                ("single", f("where is {sib} moving to?"), f("{sib_city}")),
            ],
            order=2,
            after="sibling_job",
        )
    )
    eps.append(
        _Episode(
            "pet",
            [
                (
                    "user",
                    f(
                        c(
                            [
                                "*we brought home a rescue {breed} last weekend, the kids call him {pet}",
                                "*meet {pet}: a three-year-old {breed} from the shelter, he chewed a shoe already",
                            ]
                        )
                    ),
                ),
                (
                    "assistant",
                    "Welcome to the family! The first weeks are about routine: fixed "
                    "feeding times, short walks, and a quiet corner that is only his.",
                ),
            ],
            [
                (
                    "single",
                    f(c(["what's the name of our {breed}?", "what did we call the {breed}?"])),
                    f("{pet}"),
                ),
                (
                    "paraphrase",
                    c(["what kind of dog did we adopt?", "which breed is our new pup?"]),
                    f("{breed}"),
                ),
            ],
        )
    )
    eps.append(
        _Episode(
            "job_old",
            [
                (
                    "user",
                    f(
                        c(
                            [
                                "*work is busy, being a {job_old} at {co_old} means quarter end is chaos",
                                "*I've been a {job_old} at {co_old} for four years now, time flies",
                            ]
                        )
                    ),
                ),
                (
                    "assistant",
                    "Quarter ends are rough everywhere. Block an hour a day for focus work "
                    "if you can.",
                ),
            ],
            [],
            order=1,
        )
    )
    eps.append(
        _Episode(
            "job_new",
            [
                (
                    "user",
                    f(
                        c(
                            [
                                "*I accepted the offer! starting at {co_new} as a {job_new} in three weeks",
                                "*signed the contract with {co_new} today, {job_new}, I hand in my notice tomorrow",
                            ]
                        )
                    ),
                ),
                (
                    "assistant",
                    f(
                        "Congratulations! Leaving {co_old} after so long is a big step. Take a "
                        "few days off between the two jobs if you can."
                    ),
                ),
            ],
            [
                (
                    "single",
                    c(["where do I work now?", "which company is my current job at?"]),
                    f("{co_new}"),
                ),
                (
                    "temporal",
                    f(
                        c(
                            [
                                "when did I accept the job at {co_new}?",
                                "when did I sign with {co_new}?",
                            ]
                        )
                    ),
                    "session date",
                ),
            ],
            order=2,
            after="job_old",
        )
    )
    eps.append(
        _Episode(
            "car_old",
            [
                (
                    "user",
                    f(
                        c(
                            [
                                "*the {car_old} needs new brakes again, it's fifteen years old",
                                "*my old {car_old} failed its inspection, the exhaust this time",
                            ]
                        )
                    ),
                ),
                (
                    "assistant",
                    "At that age, add up a year of repairs and compare it with what a "
                    "newer car would cost you.",
                ),
            ],
            [],
            order=1,
        )
    )
    eps.append(
        _Episode(
            "car_new",
            [
                (
                    "user",
                    f(
                        c(
                            [
                                "*we sold the {car_old} and picked up a {car_new}, charging at home is so easy",
                                "*done: the {car_new} is in our driveway, the {car_old} went to a dealer",
                            ]
                        )
                    ),
                ),
                ("assistant", "Nice upgrade. Set the home charger to the cheap night tariff."),
            ],
            [
                (
                    "single",
                    c(["what car do I drive now?", "what's our current car?"]),
                    f("{car_new}"),
                ),
            ],
            order=2,
            after="car_old",
        )
    )
    eps.append(
        _Episode(
            "sport",
            [
                (
                    "user",
                    f(
                        c(
                            [
                                "*signed up for {sport} at the {sport_place}, tuesdays and thursdays",
                                "*I joined a {sport_place}! trying {sport} twice a week",
                            ]
                        )
                    ),
                ),
                (
                    "assistant",
                    f(
                        "Great way to stay active. Go easy the first weeks — {sport} uses "
                        "muscles you don't know you have."
                    ),
                ),
            ],
            [
                (
                    "single",
                    c(["which club did I join?", "what did I sign up for at the club?"]),
                    f("{sport}"),
                ),
                (
                    "paraphrase",
                    c(["how do I keep fit these days?", "what exercise hobby did I pick up?"]),
                    f("{sport}"),
                ),
            ],
        )
    )
    eps.append(
        _Episode(
            "book_rec",
            [
                (
                    "user",
                    f(
                        c(
                            [
                                "*{coworker} from work lent me {book} by {author}, says it's her favourite",
                                "*{coworker} recommended {book}, I'll start it on the train",
                            ]
                        )
                    ),
                ),
                ("assistant", f("{book} is a good pick — {author} writes beautifully.")),
            ],
            [],
            order=1,
        )
    )
    eps.append(
        _Episode(
            "book_done",
            [
                (
                    "user",
                    f(
                        c(
                            [
                                "*finished {book} last night, honestly one of the best things I've read",
                                "*{book} was a bit slow for me, I gave up halfway",
                            ]
                        )
                    ),
                ),
                (
                    "assistant",
                    "Thanks for telling me how it went — want a recommendation in the "
                    "same vein, or something different?",
                ),
            ],
            [],
            order=2,
            after="book_rec",
        )
    )
    eps.append(
        _Episode(
            "paint",
            [
                (
                    "user",
                    f(
                        c(
                            [
                                "*we painted the {room} {colour} over the weekend",
                                "*the {room} is finally done, we went with {colour} walls",
                            ]
                        )
                    ),
                ),
                (
                    "assistant",
                    "Sounds lovely. Leave the windows open for a day or two for the smell.",
                ),
            ],
            [
                ("single", f("what colour did we paint the {room}?"), f("{colour}")),
                (
                    "paraphrase",
                    "which hue did we choose for where we "
                    + {
                        "bedroom": "sleep",
                        "kitchen": "cook",
                        "study": "sit at the desk",
                        "hallway": "hang our coats",
                        "living room": "watch TV",
                    }[p["room"]]
                    + " now?",
                    f("{colour}"),
                ),
            ],
        )
    )
    eps.append(
        _Episode(
            "trip",
            [
                (
                    "user",
                    f(
                        c(
                            [
                                "*booked flights to {trip} for the autumn holidays!",
                                "*we're going to {trip} in october, flights are booked",
                            ]
                        )
                    ),
                ),
                (
                    "assistant",
                    f("{trip} in autumn is wonderful. Want me to suggest a few day trips?"),
                ),
                ("user", "later maybe, first I need to sort the passports"),
            ],
            [
                (
                    "single",
                    c(["where are we going on holiday?", "which city did I book flights to?"]),
                    f("{trip}"),
                ),
                ("temporal", f("when did I book the {trip} flights?"), "session date"),
            ],
        )
    )
    eps.append(
        _Episode(
            "doctor",
            [
                (
                    "assistant",
                    f(
                        c(
                            [
                                "Did you manage to book the {doctor} appointment?",
                                "Is the {doctor} appointment sorted?",
                            ]
                        )
                    ),
                ),
                ("user", f(c(["*yes, {day} at 4", "*yep, {day} morning"]))),
            ],
            [
                (
                    "single",
                    f(
                        c(
                            [
                                "which day is my {doctor} appointment?",
                                "when did I book the {doctor} for?",
                            ]
                        )
                    ),
                    f("{day}"),
                ),
            ],
        )
    )
    eps[-1].turns[0] = ("assistant", "*" + eps[-1].turns[0][1])
    eps.append(
        _Episode(
            "plumber",
            [
                ("user", "the kitchen tap has been dripping for a week, it's driving me mad"),
                (
                    "assistant",
                    "*Probably a worn washer or cartridge. Has the plumber been round yet?",
                ),
                ("user", f("*not yet, coming {plumber_day}")),
            ],
            [
                ("single", "when is the plumber coming for the tap?", f("{plumber_day}")),
            ],
        )
    )
    eps.append(
        _Episode(
            "language",
            [
                (
                    "user",
                    f(
                        c(
                            [
                                "*I'm learning {lang} with {app}, twenty minutes a day",
                                "*started {lang} with {app}, I want to be able to order food at least",
                            ]
                        )
                    ),
                ),
                (
                    "assistant",
                    f(
                        "{lang} is a fun one. Label things around the house and listen to "
                        "podcasts for learners — it adds up quickly."
                    ),
                ),
            ],
            [
                ("single", f("which language am I learning with {app}?"), f("{lang}")),
                (
                    "paraphrase",
                    c(
                        [
                            "what foreign tongue am I studying?",
                            "which tongue am I trying to master?",
                        ]
                    ),
                    f("{lang}"),
                ),
            ],
        )
    )
    eps.append(
        _Episode(
            "plant",
            [
                (
                    "user",
                    f("*the {plant} in the study has yellow leaves, I think I overwatered it"),
                ),
                (
                    "assistant",
                    f(
                        "Let the soil dry out, check the roots for rot and move the {plant} "
                        "out of direct sun for a while."
                    ),
                ),
                ("user", "ok will do"),
            ],
            [
                ("paraphrase", "which houseplant was I worried about?", f("{plant}")),
            ],
        )
    )
    eps.append(
        _Episode(
            "birthday",
            [
                (
                    "user",
                    f(
                        c(
                            [
                                "*it's {kid}'s birthday party today, {kid_age} already",
                                "*party day! {kid} turns {kid_age}, the house is full of balloons",
                            ]
                        )
                    ),
                ),
                ("assistant", f("Happy birthday to {kid}! {kid_age} is a great age.")),
            ],
            [
                ("temporal", f("when was {kid}'s birthday party?"), "session date"),
                ("single", f("how old did {kid} turn?"), f("{kid_age}")),
            ],
        )
    )
    eps.append(
        _Episode(
            "dish",
            [
                (
                    "user",
                    f(
                        c(
                            [
                                "*cooked {dish} for {partner}'s parents, they asked for the recipe",
                                "*made {dish} for the first time for {partner}, total success",
                            ]
                        )
                    ),
                ),
                ("assistant", "Well done! Write down what you changed while it's fresh."),
            ],
            [
                (
                    "single",
                    c(
                        [
                            "what dish did I cook that went down well?",
                            "which recipe did I make that was a success?",
                        ]
                    ),
                    f("{dish}"),
                ),
            ],
        )
    )
    eps.append(
        _Episode(
            "teacher",
            [
                (
                    "user",
                    f(
                        c(
                            [
                                "*{kid}'s new teacher is {teacher}, seems strict but fair",
                                "*parents' evening: {teacher} is {kid}'s teacher this year, very kind",
                            ]
                        )
                    ),
                ),
                (
                    "assistant",
                    "A good relationship with the teacher helps a lot. Ask how you can "
                    "support at home.",
                ),
            ],
            [
                ("single", f("who is {kid}'s teacher?"), f("{teacher}")),
                ("paraphrase", "who runs the classroom my child is in?", f("{teacher}")),
            ],
        )
    )
    eps.append(
        _Episode(
            "flat",
            [
                (
                    "user",
                    f(
                        c(
                            [
                                "*we got the keys to the new flat on {street}! moving boxes everywhere",
                                "*moved into the place on {street} at last, still no curtains",
                            ]
                        )
                    ),
                ),
                (
                    "assistant",
                    "Congratulations on the new home! Unpack the kitchen and the beds "
                    "first, the rest can wait.",
                ),
            ],
            [
                (
                    "single",
                    c(["what street is our new flat on?", "where did we move to?"]),
                    f("{street}"),
                ),
                ("paraphrase", "what's our address these days?", f("{street}")),
                ("temporal", f("when did we move to {street}?"), "session date"),
            ],
        )
    )
    eps.append(
        _Episode(
            "gift",
            [
                (
                    "user",
                    f(
                        c(
                            [
                                "*bought {partner} {gift} for the birthday, hope it's a hit",
                                "*{partner}'s present is sorted: {gift}",
                            ]
                        )
                    ),
                ),
                (
                    "assistant",
                    "That's a thoughtful gift. Want ideas for how to wrap or hand it over?",
                ),
                ("user", "no it's fine, thanks"),
            ],
            [
                ("single", f("what did I get {partner} for the birthday?"), f("{gift}")),
                ("paraphrase", "what did I choose as a gift for my other half?", f("{gift}")),
            ],
        )
    )
    eps.append(
        _Episode(
            "race",
            [
                (
                    "user",
                    f(
                        c(
                            [
                                "*registered for the {race_city} {race}, I have to start training",
                                "*I'm in: {race_city} {race}, bib number arrives by post",
                            ]
                        )
                    ),
                ),
                (
                    "assistant",
                    "Great goal! Build up slowly — no more than ten percent more distance "
                    "per week — and plan one long run each weekend.",
                ),
            ],
            [
                (
                    "single",
                    c(["which race did I register for?", "what race am I doing?"]),
                    f("{race_city} {race}"),
                ),
                ("temporal", f("when did I sign up for the {race_city} {race}?"), "session date"),
            ],
        )
    )
    eps.append(
        _Episode(
            "anniversary",
            [
                (
                    "user",
                    f(
                        c(
                            [
                                "*{partner} and I have been together {years} years today",
                                "*anniversary dinner tonight, {years} years with {partner}",
                            ]
                        )
                    ),
                ),
                ("assistant", f("Happy anniversary! {years} years is something to celebrate.")),
            ],
            [
                ("single", f("how many years have I been with {partner}?"), f("{years}")),
                ("temporal", "when is our anniversary?", "session date"),
            ],
        )
    )
    return eps


SMALL_TALK = [
    [("user", "ugh, monday"), ("assistant", "Mondays! Anything I can take off your plate?")],
    [
        ("user", "it's pouring rain here again"),
        ("assistant", "Perfect weather for staying in. Anything you want to get done?"),
    ],
    [
        ("user", "I think I need a holiday"),
        ("assistant", "Sounds like it! Even a long weekend away can help."),
    ],
    [
        ("user", "just had the best coffee of the week"),
        ("assistant", "Nothing beats a good coffee. Where from?"),
        ("user", "the little place near the station"),
    ],
    [("user", "the kids are finally asleep"), ("assistant", "Enjoy the quiet!")],
    [
        ("user", "so tired today, slept badly"),
        ("assistant", "Sorry to hear that. Keep it light today if you can."),
    ],
    [
        ("user", "did you know octopuses have three hearts?"),
        ("assistant", "I did! Two pump blood through the gills, one through the rest of the body."),
    ],
    [
        ("user", "traffic was terrible this morning"),
        ("assistant", "Ugh. Did you at least have a podcast on?"),
        ("user", "yes, that helped"),
    ],
]


def _words(text: str) -> set[str]:
    """Content words, as the full-text search sees them (stop words dropped)."""
    from nixx.store.fts_query import query_terms

    return set(query_terms(text))


def _paraphrase_words(ep: _Episode) -> set[str]:
    return {w for cat, q, _ in ep.questions if cat == "paraphrase" for w in _words(q)}


def _filler(rng: random.Random, deck: list[tuple[str, str]]) -> list[tuple[str, str]]:
    kind = rng.random()
    if kind < 0.55:
        if not deck:
            deck.extend(rng.sample(FILLER, len(FILLER)))
        q, a = deck.pop()
        out = [("user", q), ("assistant", a)]
        if rng.random() < 0.5:
            out += [("user", rng.choice(ACKS)), ("assistant", rng.choice(ACK_REPLIES))]
        return out
    return list(rng.choice(SMALL_TALK))


def _month_events(rng: random.Random, p: dict[str, str], kind: str) -> list[list[tuple[str, str]]]:
    """Several episodes of one recurring kind (restaurants, films), one per session: the
    temporal question asks which one was in a given month or the week after an event."""
    if kind == "restaurant":
        names = rng.sample(RESTAURANTS, 4)
        return [
            [
                (
                    "user",
                    rng.choice(
                        [
                            f"we had dinner at {n} tonight, the food was great",
                            f"tried {n} with {p['partner']}, would go again",
                            f"lunch at {n} today, a bit pricey but good",
                        ]
                    ),
                ),
                ("assistant", "Sounds like a nice evening out!"),
            ]
            for n in names
        ]
    names = rng.sample(FILMS, 4)
    return [
        [
            (
                "user",
                rng.choice(
                    [
                        f"watched {n} last night, still thinking about it",
                        f"we saw {n} at the cinema, {p['partner']} loved it",
                        f"finally got round to {n}, worth the hype",
                    ]
                ),
            ),
            ("assistant", "Glad you enjoyed it — what did you think of the ending?"),
        ]
        for n in names
    ]


def _conversation(index: int, rng: random.Random) -> Conversation:
    p = _persona(rng, index)
    conv = Conversation(name=f"conv{index + 1}-{p['user'].lower()}")
    # sessions: 14-16, 3-20 days apart, starting in 2025
    n_sessions = rng.randint(14, 16)
    start = datetime(2025, rng.randint(1, 3), rng.randint(1, 28), tzinfo=UTC)
    dates: list[datetime] = []
    day = start
    for _ in range(n_sessions):
        dates.append(day.replace(hour=rng.randint(7, 21), minute=rng.randint(0, 59)))
        day = day + timedelta(days=rng.randint(3, 20))

    episodes = _episodes(rng, p)
    # place the fact episodes in sessions (order constraints: `after` in an earlier one)
    where: dict[str, int] = {}
    plan: list[list[tuple[str, object]]] = [[] for _ in range(n_sessions)]
    half = n_sessions // 2
    for ep in sorted(episodes, key=lambda e: e.after is not None):
        if ep.after is not None:
            lo = where[ep.after] + 2
            s = rng.randint(min(lo, n_sessions - 1), n_sessions - 1)
        elif ep.order == 1:
            s = rng.randint(0, half - 1)
        else:
            s = rng.randint(0, n_sessions - 1)
        where[ep.key] = s
        plan[s].append(("fact", ep))
    # recurring events: one per session, in distinct sessions
    recurring: dict[str, list[int]] = {}
    for kind in ("restaurant", "film"):
        sessions = sorted(rng.sample(range(n_sessions), 4))
        recurring[kind] = sessions
        for s, ep_turns in zip(sessions, _month_events(rng, p, kind), strict=True):
            plan[s].append((kind, ep_turns))
    for rows in DISTRACTORS.values():
        for turn in rows:
            plan[rng.randrange(n_sessions)].append(("distractor", [turn]))

    deck: list[tuple[str, str]] = []
    evidence_pos: dict[str, list[int]] = {}  # episode key -> positions of starred rows
    event_pos: dict[str, list[tuple[int, int]]] = {"restaurant": [], "film": []}
    for s, items in enumerate(plan):
        rng.shuffle(items)
        when = dates[s]
        if conv.rows:
            conv.rows.append(Row("marker", "session_clear", when - timedelta(minutes=1)))
        turns: list[tuple[str, str, str, object]] = []  # role, text, tag, payload
        turns += [
            ("user", rng.choice(GREETINGS), "", None),
            ("assistant", rng.choice(GREETING_REPLIES), "", None),
        ]
        fillers_left = rng.randint(5, 8)
        for kind, payload in items:
            if fillers_left and rng.random() < 0.6:
                for role, text in _filler(rng, deck):
                    turns.append((role, text, "", None))
                fillers_left -= 1
            if kind == "fact":
                assert isinstance(payload, _Episode)
                for role, text in payload.turns:
                    if role == "user" and len(text) > 30 and rng.random() < 0.5:
                        star = "*" if text.startswith("*") else ""
                        lead = rng.choice(LEADS)
                        tail = rng.choice(TAILS) if rng.random() < 0.5 else ""
                        # a paraphrase question must keep sharing no word with its evidence
                        taken = _paraphrase_words(payload)
                        lead = "" if _words(lead) & taken else lead
                        tail = "" if _words(tail) & taken else tail
                        text = star + lead + text.lstrip("*") + tail
                    turns.append((role, text, payload.key, None))
            elif kind in ("restaurant", "film"):
                for j, (role, text) in enumerate(payload):  # type: ignore[misc]
                    turns.append((role, text, kind if j == 0 else "", None))
            else:
                for role, text in payload:  # type: ignore[misc]
                    turns.append((role, text, "", None))
                    if role == "user":
                        turns.append(("assistant", rng.choice(DISTRACTOR_REPLIES), "", None))
        for _ in range(fillers_left):
            for role, text in _filler(rng, deck):
                turns.append((role, text, "", None))
        turns += [
            ("user", rng.choice(BYES), "", None),
            ("assistant", rng.choice(BYE_REPLIES), "", None),
        ]
        t = when
        for role, text, tag, _ in turns:
            t = t + timedelta(seconds=rng.randint(20, 240))
            starred = text.startswith("*")
            conv.rows.append(Row(role, text.lstrip("*"), t))
            if starred:
                evidence_pos.setdefault(tag, []).append(len(conv.rows) - 1)
            elif tag in event_pos:
                event_pos[tag].append((len(conv.rows) - 1, s))

    def ask(category: str, text: str, evidence: list[int], answer: str) -> None:
        conv.questions.append(Question(text, category, sorted(evidence), answer))

    for ep in episodes:
        for category, text, answer in ep.questions:
            ask(category, text, evidence_pos[ep.key], answer)
    # multi-hop: two rows from different sessions
    ask(
        "multi-hop",
        f"which city is my {p['sib_rel']} the {p['sib_job']} moving to?",
        evidence_pos["sibling_job"] + evidence_pos["sibling_city"],
        p["sib_city"],
    )
    ask(
        "multi-hop",
        f"did I enjoy the book {p['coworker']} lent me?",
        evidence_pos["book_rec"] + evidence_pos["book_done"],
        "see the book rows",
    )
    ask(
        "multi-hop",
        f"what job did I have before I joined {p['co_new']}?",
        evidence_pos["job_old"] + evidence_pos["job_new"],
        p["job_old"],
    )
    ask(
        "multi-hop",
        "which car did we get rid of, and what replaced it?",
        evidence_pos["car_old"] + evidence_pos["car_new"],
        f"{p['car_old']} -> {p['car_new']}",
    )
    ask(
        "multi-hop",
        "what instrument does the kid whose party we threw play?",
        evidence_pos["birthday"] + evidence_pos["instrument"],
        p["instr"],
    )
    ask(
        "multi-hop",
        f"what does my {p['sib_rel']} do, and where are they moving?",
        evidence_pos["sibling_job"] + evidence_pos["sibling_city"],
        f"{p['sib_job']}, {p['sib_city']}",
    )
    # temporal by period: the month of one event, the week after another
    for kind, noun in (("restaurant", "restaurant"), ("film", "film")):
        rows = event_pos[kind]
        months = [conv.rows[r].created_at.strftime("%B %Y") for r, _ in rows]
        for (r, _s), month in zip(rows, months, strict=True):
            if months.count(month) == 1:
                verb = "eat at" if kind == "restaurant" else "watch"
                ask("temporal", f"which {noun} did we {verb} in {month}?", [r], month)
                break
    # the week after: an evidence row of a fact episode, then the first event 1-9 days later
    for key, label in (
        ("birthday", f"{p['kid']}'s birthday party"),
        ("trip", f"booking the {p['trip']} flights"),
        ("pet", f"bringing {p['pet']} home"),
    ):
        anchor = evidence_pos[key][0]
        at = conv.rows[anchor].created_at
        for kind in ("film", "restaurant"):
            later = [
                r
                for r, _ in event_pos[kind]
                if timedelta(days=1) <= conv.rows[r].created_at - at <= timedelta(days=10)
            ]
            if later:
                noun = "film did we see" if kind == "film" else "restaurant did we try"
                ask(
                    "temporal",
                    f"which {noun} the week after {label}?",
                    [anchor, later[0]],
                    conv.rows[later[0]].content,
                )
                break
    return conv


# Questions about nothing in any conversation: calibrate recall's floor (nothing of the
# past should be injected for them).
UNRELATED = [
    "what is the boiling point of liquid nitrogen?",
    "who wrote War and Peace?",
    "how do I configure nginx as a reverse proxy for a node app?",
    "explain the difference between TCP and UDP",
    "what's the population of Brazil?",
    "how does a transistor amplify a signal?",
    "write a haiku about autumn leaves",
    "what are the rules of cricket in simple terms?",
    "how do vaccines train the immune system?",
    "translate 'good morning' into Swahili",
    "what is a monad in functional programming?",
    "how far is the moon from the earth?",
    "what causes the northern lights?",
    "give me a SQL query that finds duplicate emails in a users table",
    "who painted the Sistine Chapel ceiling?",
    "how do I compute a moving average in pandas?",
    "what is the tallest mountain in Africa?",
    "how do solar panels generate electricity?",
    "what's the plot of Hamlet in two sentences?",
    "how many bones are in the human body?",
    "what is quantum entanglement?",
    "how do I undo the last git commit but keep the changes?",
    "why is the sky blue?",
    "what's the difference between a crocodile and an alligator?",
    "how do I write a unit test with pytest fixtures?",
    "what does GDP measure?",
    "suggest a name for a fantasy novel about dragons",
    "how do bees make honey?",
    "what's the chemical formula of table salt?",
    "how do I convert celsius to fahrenheit?",
    "what year did the Berlin wall fall?",
    "explain how public key cryptography works",
    "what is the speed of sound in water?",
    "how does compound interest work?",
    "list three famous jazz pianists",
    "what is the main ingredient of guacamole?",
    "how do I set up a python virtual environment?",
    "what is the largest desert on earth?",
    "why do cats purr?",
    "how does a bill become a law?",
]


def build(seed: int = 12, conversations: int = 5) -> list[Conversation]:
    """The benchmark: `conversations` conversations, deterministic for a seed."""
    rng = random.Random(seed)
    return [_conversation(i, random.Random(rng.getrandbits(64))) for i in range(conversations)]


__all__ = ["UNRELATED", "CATEGORIES", "Conversation", "Question", "Row", "build"]
