"""A realistic two-friend dialogue benchmark for episodic recall (bench/bench_recall.py).

    from dialogue_data import build
    conversations = build(seed=7)

Same interface as `recall_data` (`Row`, `Question`, `Conversation`, `CATEGORIES`, `build`),
but built like real multi-party chat logs (LoCoMo-like) rather than like a person talking to
an assistant: two friends chat over 18-28 dated sessions spread across months. Every turn is
one row whose content starts with the speaker's name ("Caroline: ..."); the first friend's
rows have role ``user``, the second's ``assistant`` (both are people). A ``marker`` row
separates sessions, as `/clear` writes.

Realism on purpose (what a memory must cope with in real use):

- small talk carries most turns: greetings, reactions, "how about you?", the same common
  words (day, week, work, kids, weekend, time, really, good) everywhere, and the friends
  address each other by name all the time;
- facts are said in passing inside longer turns, relative time words ("yesterday", "last
  weekend", "next month") are resolved only by the session date;
- the answer is often in the turn after a question ("What did you name her?" - "Biscuit!"),
  both rows are evidence;
- corrections across sessions (the recital moved to Friday, the class moved day, a new job):
  a question about the current value has the newer row as evidence;
- recurring topics (a hobby over 3-4 sessions, two kids' instruments in two sessions) make
  multi-hop and open questions need rows from several sessions;
- distractors: the other friend's pet, trip, job and hobby share a question's words, and
  so do a few rows about neighbours and colleagues.

Questions are asked the way a person asks later, naming people; their wording sometimes
shares the evidence's words, sometimes only stems or synonyms, sometimes nothing.
Everything comes from templates and a seeded `random.Random`: the same seed gives the same
benchmark byte for byte. Python stdlib only.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from recall_data import RESTAURANTS, Conversation, Question, Row

CATEGORIES = ("single", "temporal", "multi-hop", "open")
MARKER = "session_clear"

# ---- people ----------------------------------------------------------------------------
FRIENDS = [  # (full name, what the other friend calls them, gender)
    ("Caroline", "Caro", "f"),
    ("Melanie", "Mel", "f"),
    ("Jonathan", "Jon", "m"),
    ("Gina", "Gina", "f"),
    ("Deborah", "Deb", "f"),
    ("Samuel", "Sam", "m"),
    ("Audrey", "Audrey", "f"),
    ("Andrew", "Andy", "m"),
    ("Joanna", "Jo", "f"),
    ("Nathaniel", "Nate", "m"),
    ("Tamara", "Tam", "f"),
    ("Evan", "Evan", "m"),
    ("Maria", "Maria", "f"),
    ("John", "John", "m"),
    ("Priya", "Pri", "f"),
    ("Daniel", "Dan", "m"),
    ("Rebecca", "Becca", "f"),
    ("Oliver", "Ollie", "m"),
    ("Natalie", "Nat", "f"),
    ("Marcus", "Marc", "m"),
    ("Yasmin", "Yas", "f"),
    ("Calvin", "Cal", "m"),
    ("Lucia", "Lu", "f"),
    ("Timothy", "Tim", "m"),
]
PARTNERS_M = ["Mark", "Ben", "Luis", "Tom", "Raj", "Kevin", "Diego", "Paul", "Hugo", "Chris"]
PARTNERS_F = ["Anna", "Sophie", "Elena", "Rachel", "Mei", "Laura", "Nadia", "Claire", "Ivy"]
KIDS_M = ["Noah", "Leo", "Finn", "Theo", "Max", "Eli", "Owen", "Jack", "Milo", "Sami"]
KIDS_F = ["Ella", "Zoe", "Mila", "Ava", "Lily", "Rosie", "Nora", "Isla", "June", "Maya"]
SIBLINGS_M = ["Alex", "Pete", "Omar", "Karl", "Danny", "Will"]
SIBLINGS_F = ["Hanna", "Greta", "Jess", "Amy", "Kate", "Lena"]
PRON = {"f": ("she", "her", "her"), "m": ("he", "him", "his")}

CITIES = [
    "Portland",
    "Denver",
    "Austin",
    "Boston",
    "Seattle",
    "Chicago",
    "Minneapolis",
    "San Diego",
    "Nashville",
    "Pittsburgh",
    "Philadelphia",
    "Sacramento",
]
SIB_CITIES = ["Dublin", "Toronto", "Miami", "Phoenix", "London", "Vancouver", "Atlanta", "Madrid"]

# ---- jobs ------------------------------------------------------------------------------
CHANGE_JOBS = [  # (title, company)
    ("graphic designer", "Brightline Studio"),
    ("accountant", "Harper & Cole"),
    ("software developer", "Tidewater Tech"),
    ("marketing manager", "Bloom Foods"),
    ("sales rep", "Northwind Supply"),
    ("project manager", "Cobalt Health"),
    ("data analyst", "Fennel Systems"),
    ("HR coordinator", "Granite Bank"),
    ("copywriter", "Lumen Press"),
    ("UX researcher", "Okapi Labs"),
]
OLD_JOB_GRIPES = [
    "since the new manager came in it's just meetings all day and nobody listens",
    "they keep piling on more work and cutting the team",
    "I haven't had a raise in three years and the commute is an hour each way",
    "the whole place is being restructured and everyone's stressed",
    "it's the same thing every day and I feel like I stopped learning",
]
STABLE_JOBS = [  # (title, a turn that says it, the promotion)
    (
        "nurse",
        [
            "Just got off a twelve-hour shift at the hospital — nursing is no joke, my feet are killing me",
            "Night shifts on the ward again this week. Being a nurse in winter is brutal, everyone is sick",
        ],
        "charge nurse",
    ),
    (
        "teacher",
        [
            "Marking essays all evening, the glamorous life of a teacher haha",
            "My class of fourth graders was wild today, teaching is never boring",
        ],
        "head of the English department",
    ),
    (
        "chef",
        [
            "Double shift in the kitchen tonight, being a chef on a Saturday is pure chaos",
            "We changed the whole menu at the restaurant this week, I've been cooking nonstop",
        ],
        "head chef",
    ),
    (
        "vet",
        [
            "Long day at the clinic — I stitched up a very grumpy cat, the joys of being a vet",
            "Three emergency surgeries today at the animal clinic, being a vet is exhausting some days",
        ],
        "practice manager at the clinic",
    ),
    (
        "firefighter",
        [
            "Back at the fire station for four days straight, the firefighter schedule is rough",
            "We had two call-outs last night at the station, firefighting never sleeps",
        ],
        "lieutenant",
    ),
    (
        "librarian",
        [
            "Story time at the library was chaos today, twenty toddlers and one librarian",
            "Spent the whole day cataloguing donations at the library, my librarian brain is fried",
        ],
        "branch manager",
    ),
    (
        "electrician",
        [
            "Rewired a whole old house today, electrician work in a crawl space is no fun",
            "Long day on a job site, being an electrician in this heat is rough",
        ],
        "site supervisor",
    ),
]

# ---- hobbies ---------------------------------------------------------------------------
HOBBIES = [  # recurring hobby with things made/done over several sessions
    dict(
        name="pottery",
        cls="pottery class",
        verb="made",
        items=[
            "a lopsided bowl",
            "a mug for my mom",
            "a little vase",
            "a set of plates",
            "a teapot",
        ],
        q_made=[
            "What has {X} made in {his} pottery class?",
            "What pieces has {X} made at ceramics?",
            "What did {X} make at the pottery studio?",
        ],
        reason="I always wanted to try the wheel, and it's so relaxing getting my hands in the clay",
        gift="a set of pottery tools",
    ),
    dict(
        name="painting",
        cls="painting class",
        verb="painted",
        items=[
            "a sunset over the lake",
            "a portrait of my grandma",
            "the old lighthouse",
            "a field of sunflowers",
        ],
        q_made=[
            "What has {X} painted so far?",
            "What paintings has {X} done in {his} class?",
            "What subjects has {X} chosen for {his} artwork?",
        ],
        reason="I used to paint in college and I really missed it, it's my way to switch off",
        gift="a set of watercolour paints",
    ),
    dict(
        name="guitar",
        cls="guitar lessons",
        verb="learned",
        items=["Wonderwall", "Blackbird", "Hotel California", "Let It Be", "Stand By Me"],
        q_made=[
            "Which songs has {X} learned on guitar?",
            "What can {X} play on the guitar now?",
            "What songs has {X} been practising in {his} lessons?",
        ],
        reason="my dad's old guitar was just sitting in the closet and I thought, why not",
        gift="a new guitar strap and capo",
    ),
    dict(
        name="baking",
        cls="baking course",
        verb="baked",
        items=[
            "a sourdough loaf",
            "a lemon tart",
            "croissants from scratch",
            "a three-layer carrot cake",
        ],
        q_made=[
            "What has {X} baked in {his} course?",
            "What bakes has {X} made so far?",
            "What did {X} bake?",
        ],
        reason="I watch way too much Bake Off and finally wanted to learn properly",
        gift="a fancy stand mixer",
    ),
    dict(
        name="woodworking",
        cls="woodworking workshop",
        verb="built",
        items=["a birdhouse", "a little bookshelf", "a cutting board", "a step stool for the kids"],
        q_made=[
            "What has {X} built in {his} woodworking workshop?",
            "What has {X} made out of wood?",
            "What projects has {X} finished at the woodshop?",
        ],
        reason="I spend all day on screens and I wanted to make something real with my hands",
        gift="a good set of chisels",
    ),
    dict(
        name="photography",
        cls="photography course",
        verb="shot",
        items=[
            "the fog over the bridge",
            "a heron by the river",
            "the night skyline",
            "portraits of strangers downtown",
        ],
        q_made=[
            "What has {X} photographed for {his} course?",
            "What photos has {X} taken so far?",
            "What has {X} been shooting with {his} camera?",
        ],
        reason="I got a proper camera for my birthday ages ago and never learned to use it",
        gift="a new camera lens",
    ),
    dict(
        name="knitting",
        cls="knitting circle",
        verb="knitted",
        items=[
            "a scarf for my dad",
            "a wonky beanie",
            "baby socks for my cousin",
            "a chunky blanket",
        ],
        q_made=[
            "What has {X} knitted?",
            "What has {X} made at {his} knitting group?",
            "What knits has {X} finished?",
        ],
        reason="my grandma taught me as a kid and I wanted to pick it back up",
        gift="some nice merino yarn",
    ),
]
HOBBIES2 = [  # a hobby taken up later (after a job change)
    ("yoga", "going to yoga"),
    ("bouldering", "bouldering at the climbing gym"),
    ("salsa", "salsa classes"),
    ("running", "running with a club"),
    ("chess", "playing chess at the club downtown"),
    ("swimming", "swimming laps before breakfast"),
    ("tennis", "tennis lessons"),
    ("gardening", "gardening at the community plot"),
]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]

# ---- pets ------------------------------------------------------------------------------
PETS = {
    "dog": dict(
        baby="puppy",
        syn="pup",
        breeds=["golden retriever", "beagle", "corgi", "border collie", "labrador", "dachshund"],
        tricks=[
            "to sit and give paw",
            "to roll over",
            "to fetch the ball",
            "to ring a bell to go outside",
        ],
        fun=[
            "{pet} stole a whole sandwich off the counter {when}",
            "{pet} has decided the new sofa is {pet_his} bed now",
            "{pet} rolled in something disgusting at the park {when}, bath time was chaos",
        ],
    ),
    "cat": dict(
        baby="kitten",
        syn="kitty",
        breeds=["tabby", "Maine Coon", "ragdoll", "black", "ginger", "Siamese"],
        tricks=["to open the cupboard doors", "to high-five for treats", "to walk on a leash"],
        fun=[
            "{pet} knocked my coffee off the desk {when}, right onto my notes",
            "{pet} has claimed the laundry basket as {pet_his} new bed",
            "{pet} caught a moth at 3am {when} and brought it to me like a present",
        ],
    ),
}
PET_NAMES = [
    "Biscuit",
    "Pepper",
    "Miso",
    "Juniper",
    "Rocket",
    "Toffee",
    "Olive",
    "Bruno",
    "Luna",
    "Oscar",
    "Maple",
    "Ziggy",
    "Pickles",
    "Nova",
]
AILMENTS = [
    "an ear infection",
    "a sore paw",
    "a tummy bug after eating a sock",
    "a bad tooth",
    "a rash",
]
SHELTERS = ["animal shelter", "rescue centre", "shelter downtown", "rescue out in the country"]

# ---- kids ------------------------------------------------------------------------------
INSTRUMENTS = ["violin", "piano", "cello", "drums", "flute", "trumpet", "guitar", "clarinet"]
PIECES = [
    "Canon in D",
    "Für Elise",
    "Ode to Joy",
    "a Bach minuet",
    "the Star Wars theme",
    "Clair de Lune",
]
SPORTS = ["soccer", "swimming", "basketball", "gymnastics", "karate", "tennis"]

# ---- trips and events ------------------------------------------------------------------
TRIPS = [
    dict(
        kind="camping",
        places=[
            "Lake Tahoe",
            "Yosemite",
            "the Smoky Mountains",
            "Big Sur",
            "the Lake District",
            "Banff",
        ],
        plan=[
            "We're going camping at {place} {when}!",
            "We booked a campsite at {place} for {when}, I can't wait",
        ],
        back=[
            "We just got back from camping at {place} — {hl}",
            "Camping at {place} {when} was amazing, {hl}",
        ],
        hl=[
            "roasting marshmallows by the fire was the best part",
            "we saw the Milky Way, it was unreal",
            "a deer walked right past our tent in the morning",
            "waking up to the lake all misty was my favourite moment",
        ],
        q_where=[
            "Where did {X} go camping?",
            "Where was {X}'s camping trip?",
            "Where did {X}'s family camp?",
        ],
        q_when=[
            "When did {X} go camping?",
            "When was {X}'s camping trip?",
            "When did {X} camp at {place}?",
        ],
    ),
    dict(
        kind="beach",
        places=["Cancun", "the Algarve", "Crete", "Maui", "Bali", "the Outer Banks"],
        plan=[
            "We booked a beach holiday in {place} for {when}",
            "Guess what, {partner} and I are off to {place} {when} for a week on the beach",
        ],
        back=[
            "Back from {place}! {Hl}",
            "Our beach week in {place} {when} was exactly what we needed, {hl}",
        ],
        hl=[
            "we went snorkelling every single morning",
            "I read four books and did absolutely nothing else",
            "we saw sea turtles right off the beach",
            "the sunsets were ridiculous",
        ],
        q_where=[
            "Where did {X} go on {his} beach holiday?",
            "Which beach destination did {X} visit?",
            "Where did {X} go for a week by the sea?",
        ],
        q_when=[
            "When did {X} go to {place}?",
            "When was {X}'s beach vacation?",
            "When did {X} get back from the beach trip?",
        ],
    ),
    dict(
        kind="hiking",
        places=[
            "the Dolomites",
            "Patagonia",
            "the Scottish Highlands",
            "Zion",
            "the Pyrenees",
            "the Rockies",
        ],
        plan=[
            "{partner} and I are going hiking in {place} {when}",
            "It's booked, we're doing a hiking trip in {place} {when}!",
        ],
        back=[
            "We got back from hiking in {place} — {hl}",
            "The hike in {place} {when} nearly killed me but {hl}",
        ],
        hl=[
            "the view from the top was worth every blister",
            "we stayed in little mountain huts every night",
            "we did twenty miles on the last day",
            "we saw an eagle circling right above us",
        ],
        q_where=[
            "Where did {X} go hiking?",
            "Where was {X}'s hiking trip?",
            "Which mountains did {X} hike in?",
        ],
        q_when=[
            "When did {X} go hiking in {place}?",
            "When was {X}'s hike?",
            "When did {X} do the hiking trip?",
        ],
    ),
    dict(
        kind="city",
        places=["Paris", "Rome", "Barcelona", "Tokyo", "Lisbon", "Prague", "New Orleans"],
        plan=[
            "We're doing a long weekend in {place} {when}",
            "Just booked flights to {place} for {when}, a little city break",
        ],
        back=[
            "{place} was incredible — {hl}",
            "Our trip to {place} {when} was so much fun, {hl}",
        ],
        hl=[
            "we ate our way through every bakery we could find",
            "we walked like fifteen miles a day",
            "the museums were amazing, even the kids loved them",
            "we got caught in a thunderstorm and ended up in the best little bar",
        ],
        q_where=[
            "Which city did {X} visit on {his} city break?",
            "Where did {X} go for the long weekend?",
            "What city did {X} travel to?",
        ],
        q_when=[
            "When did {X} go to {place}?",
            "When was {X}'s city break?",
            "When did {X} visit {place}?",
        ],
    ),
]
CAUSES = [
    "the children's hospital",
    "mental health awareness",
    "the local animal shelter",
    "cancer research",
    "a homeless shelter",
    "clean oceans",
]
DISTANCES = ["5k", "10k", "half marathon"]
BANDS = [
    "Coldplay",
    "Florence + the Machine",
    "The Lumineers",
    "Arctic Monkeys",
    "Hozier",
    "Lizzo",
    "Fleetwood Mac tribute band",
    "Mumford & Sons",
    "Norah Jones",
]
GROUPS = [
    ("LGBTQ support group", "it was really powerful hearing everyone's stories"),
    ("grief support group", "it helped more than I expected, talking about my dad"),
    ("new parents group", "it's so nice to know everyone else is just as tired"),
    ("anxiety support group", "I was nervous but everyone was so kind"),
]
VOLUNTEER = [
    "food bank",
    "animal shelter",
    "soup kitchen",
    "library reading program",
    "beach clean-up",
]
OUTINGS = [
    "the zoo",
    "the aquarium",
    "an apple orchard to go apple picking",
    "the science museum",
    "the beach for the day",
    "a pumpkin patch",
    "the farmers market",
    "the botanical garden",
    "a water park",
    "a county fair",
]
BDAY_AFTER = [
    "went ziplining for the first time",
    "did an escape room with some friends",
    "took a cooking class",
    "did a sunrise hike",
    "went to a comedy show",
    "went paddleboarding on the lake",
    "got my first tattoo",
    "went on a hot air balloon ride",
]
GIFTS = [
    "concert tickets",
    "a weekend away",
    "a new bike",
    "breakfast in bed and flowers",
    "a surprise party",
    "a spa day",
]
ROOMS = ["kitchen", "bedroom", "living room", "hallway", "bathroom", "home office"]
COLOURS = ["sage green", "navy blue", "terracotta", "mustard yellow", "soft grey", "lavender"]
BOOKS = [
    ("Piranesi", "Susanna Clarke", "it's so strange and beautiful"),
    ("The Overstory", "Richard Powers", "it made me look at trees completely differently"),
    ("Project Hail Mary", "Andy Weir", "it's funny and nerdy and I cried at the end"),
    ("Circe", "Madeline Miller", "it's Greek myths but from her side"),
    ("Educated", "Tara Westover", "I couldn't believe it's a true story"),
    ("The Midnight Library", "Matt Haig", "it really makes you think about your choices"),
    ("Lessons in Chemistry", "Bonnie Garmus", "the main character is the best"),
]
MOVE_CITIES = [
    "Denver",
    "Atlanta",
    "Seattle",
    "Raleigh",
    "Phoenix",
    "Salt Lake City",
    "Charlotte",
    "Tampa",
]

# ---- small talk ------------------------------------------------------------------------
SHOWS = [
    "The Bear",
    "Ted Lasso",
    "Succession",
    "The Crown",
    "Stranger Things",
    "Bridgerton",
    "Only Murders in the Building",
    "Severance",
    "the Great British Bake Off",
]
DISHES = [
    "lasagna",
    "a Thai green curry",
    "banana bread",
    "chili",
    "homemade pizza",
    "shakshuka",
    "fish tacos",
]
GREET = [
    "Hey {o}! Good to see you, how's it going?",
    "Hi {o}! Long time no chat, what's new with you?",
    "{o}!! How have you been?",
    "Hey {o}, happy {weekday}! How's your week going?",
    "Morning {o}! Got a minute to catch up?",
    "Hi {o}! Sorry I've been MIA, it's been a crazy couple of weeks. How are you?",
    "Heyyy {o} :) how's everything?",
    "Hey, how are you doing?",
    "Evening {o}! Finally sat down after a long day. How are things?",
]
GREET_BACK = [
    "Hey {o}! Doing well, thanks — {busy}. How about you?",
    "Hi {o}! All good here, {busy}. You?",
    "{o}! So good to hear from you. Honestly {busy}. What's up with you?",
    "Hey! Pretty good, can't complain, {busy}.",
    "Hi! I'm good, {busy}. How are you, {o}?",
    "Good, thanks! {Busy}.",
]
GREET_3 = [
    "Good, good! Same old really.",
    "Pretty good! I have lots to tell you actually.",
    "Not bad! Tired, but good.",
    "Can't complain! It's been a really good week.",
    "Hanging in there, haha.",
]
BUSY = [
    "work has been crazy busy",
    "just trying to enjoy the weekend",
    "finally getting some rest after a long week",
    "it's been a really good week actually",
    "the weather's been so nice, I've been outside all the time",
    "just the usual chaos",
]
BUSY_KIDS = ["the kids have kept me running all week", "school runs and work, you know how it is"]
BYE = [
    "Anyway, I should get going — {reason}. Talk soon, {o}!",
    "Ok I have to run, {reason}. Great catching up!",
    "Gotta go, {o}! Take care.",
    "Well, it's getting late. Night {o}!",
    "I'll let you go — {reason}. Chat soon!",
    "This was so nice, {o}. Let's talk again soon!",
]
BYE_BACK = [
    "Thanks! Take care, talk soon",
    "Bye {o}! Say hi to {opartner} for me",
    "Night! Great chatting, {o}.",
    "Talk soon! Good luck with everything",
    "Bye!! Always great to talk to you.",
    "You too, {o}! Have a good one.",
]
REASONS = [
    "dinner won't make itself",
    "early start tomorrow",
    "{partner} is calling me",
    "I have a meeting in five",
    "I need to get some sleep",
    "I promised I'd help {partner} with something",
]
REASONS_KIDS = ["I have to pick up the kids", "it's bath time for the kids"]
GOOD = [
    "That's awesome!",
    "Wow, so proud of you, {o}!",
    "That's so great, {o}!",
    "Love that!",
    "No way, that's amazing!",
    "Haha that's great",
    "Aww, that's so sweet.",
    "Yay! Good for you.",
    "That sounds like so much fun!",
    "Oh wow, {o}, that's really cool.",
    "Amazing. You deserve it.",
    "Ha! Love it.",
    "That's wonderful, I'm so happy for you.",
]
BAD = [
    "Oh no, I'm sorry {o}.",
    "Ugh, that sounds rough.",
    "That's so frustrating, hang in there.",
    "Sending hugs, {o}.",
    "Oh no! I hope things get better soon.",
]
NEUTRAL = [
    "Yeah, that makes sense.",
    "Totally get that.",
    "Mm, fair.",
    "Oh wow, ok.",
    "Keep me posted, {o}!",
    "I hear you.",
    "Ha, I bet.",
]
FOLLOW_Q = [
    "How do you feel about it?",
    "Tell me more!",
    "Was it as good as you hoped?",
    "What's next?",
]
FOLLOW_A = [
    "Honestly, really good. It's been a long time coming.",
    "Pretty happy! Still sinking in.",
    "Good! Tired, but good.",
    "We'll see, one step at a time haha.",
    "Really good, thanks for asking, {o}.",
]
LEADS = [
    "Oh, by the way, ",
    "Anyway, ",
    "So ",
    "Oh and ",
    "Busy week — ",
    "Random update: ",
    "Ha, so ",
    "Honestly, ",
    "Okay so ",
    "{o}, guess what — ",
    "Oh before I forget, ",
    "News from here: ",
]
OPENERS = {
    "busy",
    "guess",
    "big",
    "so",
    "oh",
    "ok",
    "okay",
    "update",
    "random",
    "rough",
    "now",
    "news",
    "anyway",
    "honestly",
    "sorry",
    "save",
    "first",
}
TAILS = [
    "It's been a really good week.",
    "Anyway, how are things with you?",
    "Life's been busy but good.",
    "Work is still crazy, but what else is new.",
    "I'm trying to enjoy the little things, you know?",
    "Time is just flying lately.",
    "Anyway, that's my news.",
    "Sorry, I know I'm rambling.",
    "Can't believe how fast this year is going.",
    "What about you, anything new?",
    "I'll tell you more next time, I promise.",
    "Anyway, that's the latest from here.",
    "I keep thinking how lucky we are, really.",
]
LONG_TAILS = [
    "Honestly the last few weeks have been a lot, between work deadlines, family stuff and trying to keep "
    "the house from falling apart, so it's nice to have something good to tell you for a change.",
    "I keep telling myself I'll slow down and actually enjoy the weekends instead of running errands the "
    "whole time, and this time I think I might actually mean it.",
    "Anyway, enough about me, I feel like I've been talking for ages. Tell me everything that's going on "
    "with you, I want all the details, good and bad.",
    "I was telling my mom about it on the phone for like an hour yesterday and she just kept saying how "
    "proud she is, which was really sweet, even if she asked the same questions four times.",
]
TAILS_KIDS = [
    "The kids have been great too.",
    "Meanwhile the kids are driving me up the wall, haha.",
]

# small talk exchanges: (needs, lines); a line is (0|1, text), 0 is whoever starts; `needs`
# "kids1" means the second speaker has kids. Placeholders are relative to the line's speaker.
SMALL: list[tuple[str, list[tuple[int, str]]]] = [
    (
        "",
        [
            (
                0,
                "How's your week been, {o}? || How's the week treating you? || So how's your week going, {o}?",
            ),
            (
                1,
                "Pretty good! Busy with work but nothing crazy. You? || Honestly a bit of a blur, but good. You? "
                "|| Long, but ok! How about yours?",
            ),
            (
                0,
                "Same here, honestly. Just counting down to the weekend. || Same old, same old. || Not bad at all!",
            ),
        ],
    ),
    (
        "",
        [
            (
                0,
                "Is it as hot there as it is here? It's like ninety degrees today || It's so humid here today, I can't think",
            ),
            (
                1,
                "Ugh yes, I've been hiding inside with the fan on all day || Same! I've been living on iced coffee",
            ),
        ],
    ),
    (
        "",
        [
            (
                0,
                "Any plans for the weekend? || What are you up to this weekend? || Doing anything fun this weekend, {o}?",
            ),
            (
                1,
                "Not really! Probably just relaxing at home, maybe a movie night with {partner}. You? "
                "|| Nothing big, some errands and a long lunch with {partner}. You? || Sleeping in, hopefully haha. You?",
            ),
            (
                0,
                "Same, I really need a quiet one. || Cleaning the house, sadly. || Not much, which is exactly what I need.",
            ),
        ],
    ),
    (
        "",
        [
            (0, "Have you been watching {show}? || Ok I just started {show} and I'm hooked"),
            (
                1,
                "Yes!! I'm on season two. No spoilers, {o}! || I keep meaning to! Is it good? || Love it, the last episode was wild",
            ),
            (0, "Haha my lips are sealed || So good. Watch it this weekend || Right?!"),
        ],
    ),
    (
        "",
        [
            (
                0,
                "I made {dish} last night and it actually turned out good for once || Tried a new recipe for {dish} the other day",
            ),
            (
                1,
                "Haha nice! You'll have to send me the recipe || Ooh, jealous, we had leftovers again",
            ),
            (0, "Will do! || It's really easy, I'll text it to you"),
        ],
    ),
    (
        "",
        [
            (
                0,
                "So tired today. Didn't sleep well at all. || I'm running on about four hours of sleep",
            ),
            (
                1,
                "Oh no, coffee time! Hope you get some rest tonight, {o}. || Ugh, take it easy today if you can",
            ),
        ],
    ),
    (
        "",
        [
            (0, "How are things with {opartner}? || How's {opartner} doing?"),
            (
                1,
                "Good! {partner} has been working a lot lately but we're good. Thanks for asking, {o}. "
                "|| {partner} is great, says hi! || All good, {partner} is in a cooking phase so I'm not complaining",
            ),
        ],
    ),
    (
        "kids1",
        [
            (0, "How are the kids doing, {o}? || How are your little ones?"),
            (
                1,
                "They're good! Growing way too fast. School keeps them busy, and me too haha. "
                "|| Loud, happy and always hungry haha || Good! Busy with school and friends, I'm basically their driver now",
            ),
        ],
    ),
    (
        "",
        [
            (0, "Traffic was a nightmare this morning || The train was forty minutes late today"),
            (
                1,
                "Ugh, the worst. Did you at least have a good podcast on? || Oh no. Commuting is the worst part of the day",
            ),
            (0, "Yes, that saved me haha || Tell me about it"),
        ],
    ),
    (
        "",
        [
            (0, "I really need a vacation || I need a holiday so badly"),
            (
                1,
                "Same! Even just a long weekend somewhere would be nice || Don't we all! Where would you go?",
            ),
        ],
    ),
    (
        "",
        [
            (0, "Coffee or tea today?"),
            (1, "Coffee, always. Third cup already haha || Tea! I'm trying to cut back on coffee"),
            (0, "Respect. || Good for you, I could never"),
        ],
    ),
    (
        "",
        [
            (0, "It's been raining all week here || Grey and rainy again today"),
            (
                1,
                "Same here! Perfect weather for staying in with a book though || Ugh, it's been so gloomy here too",
            ),
        ],
    ),
    (
        "",
        [
            (
                0,
                "Work is so busy right now, I barely have time to breathe || Work has been nonstop this week",
            ),
            (
                1,
                "Hang in there, {o}! Make sure you take some time for yourself this weekend "
                "|| Oof. Don't forget to take breaks, ok?",
            ),
            (0, "I will, thanks. You always know what to say || Trying to!"),
        ],
    ),
    (
        "",
        [
            (0, "What have you been up to today? || What did you do today?"),
            (
                1,
                "Not much, just errands and laundry. Exciting life haha || Grocery shopping and a nap, honestly",
            ),
            (0, "Honestly that sounds kind of nice || Living the dream"),
        ],
    ),
    (
        "",
        [
            (0, "Did you end up doing anything fun last weekend? || How was your weekend?"),
            (
                1,
                "Just a lot of cooking and a long walk. It was really nice, actually || Quiet! We mostly stayed home and watched movies",
            ),
            (0, "Love a slow weekend || That sounds perfect"),
        ],
    ),
    (
        "",
        [
            (0, "Happy {weekday}!"),
            (1, "Ha, happy {weekday} to you too, {o}! || Is it {weekday} already?"),
        ],
    ),
    (
        "",
        [
            (
                0,
                "Sorry I didn't reply yesterday, it was a crazy day || Sorry for the slow replies, it's been hectic",
            ),
            (1, "No worries at all! Life happens || Don't even worry about it"),
        ],
    ),
    (
        "",
        [
            (
                0,
                "I tried that new ramen place downtown || We finally tried the taco truck near the park",
            ),
            (1, "Ooh, was it good?"),
            (
                0,
                "Really good! A bit pricey, but worth it. We should go sometime || So good. We're going back next week",
            ),
        ],
    ),
    (
        "",
        [
            (
                0,
                "Time flies, doesn't it? I can't believe it's already {month} || How is it {month} already?",
            ),
            (1, "I know! This year is going by so fast || Right? Where does the time go"),
        ],
    ),
    (
        "",
        [
            (0, "How's work going for you these days? || How's work?"),
            (
                1,
                "It's fine, busy as always. Thanks for asking! || Can't complain. Well, I could, but I won't haha",
            ),
        ],
    ),
    (
        "",
        [
            (
                0,
                "I've been trying to drink more water and go to bed earlier || New goal: no phone after ten",
            ),
            (1, "Good for you! How's that going?"),
            (0, "Badly haha, but I'm trying || Three days in, so far so good"),
        ],
    ),
    (
        "",
        [
            (0, "Do you ever just need a day where you do nothing at all?"),
            (
                1,
                "All the time. I had one last Sunday and it was amazing || Every day, honestly haha",
            ),
        ],
    ),
    (
        "",
        [
            (0, "My phone died in the middle of the day and I felt so lost"),
            (1, "Haha we're all way too attached to them"),
        ],
    ),
    (
        "",
        [
            (0, "I love this time of year || This weather is making me so happy"),
            (1, "Me too! {season} is the best, honestly || Same, it's my favourite"),
        ],
    ),
    (
        "",
        [
            (
                0,
                "Honestly, I've been feeling a bit overwhelmed lately. Between work, the house, and trying "
                "to see friends and family, there just isn't enough time in the day, and I keep saying yes "
                "to things I don't really have the energy for. I think I need to slow down a bit.",
            ),
            (
                1,
                "That makes total sense, {o}. You're allowed to say no sometimes. Maybe block out one "
                "evening a week just for yourself?",
            ),
            (0, "Yeah, you're right. I'll try that"),
        ],
    ),
    (
        "",
        [
            (
                0,
                "I went to the dentist, finally. No cavities! || Finally did my annual checkup, all good",
            ),
            (1, "Haha, look at you being a responsible adult || Yay, adulting!"),
        ],
    ),
    (
        "",
        [
            (0, "We had friends over for dinner and stayed up way too late talking"),
            (1, "Those are the best nights though"),
            (0, "They really are"),
        ],
    ),
    (
        "",
        [
            (0, "Guess who's been doing their morning walks every day this week?"),
            (1, "Is it you?? Go {o}!"),
            (0, "Haha it is. Five days in a row!"),
        ],
    ),
    (
        "",
        [
            (0, "Do you want to grab lunch sometime soon? || We should get coffee soon!"),
            (1, "Yes please! Let's find a day that works || Definitely, I miss you"),
            (0, "I'll text you"),
        ],
    ),
    (
        "",
        [
            (
                0,
                "I spent way too much money at the grocery store today, everything is so expensive now",
            ),
            (1, "Ugh, I know. Eggs cost a fortune"),
            (0, "Right?! Crazy"),
        ],
    ),
    (
        "",
        [
            (0, "Have you read anything good lately?"),
            (1, "Not really, I keep falling asleep after two pages haha"),
        ],
    ),
    (
        "",
        [
            (
                0,
                "I cleaned out my closet and found so much stuff I forgot I had || Spent the whole morning decluttering the garage",
            ),
            (1, "That's so satisfying though || Ooh, did you find any treasures?"),
            (0, "A few! And a lot of junk"),
        ],
    ),
    (
        "",
        [
            (
                0,
                "The neighbours are having a party again, I can hear every word || Someone on our street is renovating, the drilling never stops",
            ),
            (1, "Oh no haha. Earplugs! || Ugh, that would drive me crazy"),
        ],
    ),
    (
        "",
        [
            (0, "I think I'm finally getting a cold || My throat has been scratchy all day"),
            (1, "Oh no! Lots of tea and rest, {o} || Take it easy and get some sleep"),
        ],
    ),
    ("", [(0, "I finally fixed the squeaky door, I feel like a genius"), (1, "Haha, handy {o}!")]),
    (
        "",
        [
            (0, "What are you having for dinner tonight?"),
            (1, "Pasta, probably. The usual. You? || No idea yet, maybe takeout"),
            (0, "Leftovers, living the dream || Soup, it's that kind of day"),
        ],
    ),
    (
        "",
        [
            (
                0,
                "Random question, but do you still have that blue jacket? I saw one just like it today",
            ),
            (1, "Haha yes! It's my favourite, I wear it all the time"),
        ],
    ),
    (
        "",
        [
            (
                0,
                "I just realised we've been friends for almost fifteen years || Do you remember when we first met? I was thinking about it today",
            ),
            (1, "Ha! That's wild. Time really flies || Of course! We were so young"),
            (0, "Best decision ever || Feels like yesterday"),
        ],
    ),
]

# rows about other people that share the questions' words but answer none of them
DISTRACTORS = [
    "My neighbour just got a {breed} puppy and it cries all night, poor thing",
    "A friend from work went camping at {place} and came back covered in bug bites",
    "My cousin just started a new job at {company}, she seems happy",
    "{partner}'s sister adopted a kitten last month, it's tiny",
    "The kid next door practises the {instrument} every evening, the walls are thin",
    "A coworker of mine ran a half marathon last weekend, I don't know how people do it",
    "My mom signed up for a {hobby} class too, she says it's harder than it looks",
    "Someone at the gym told me about a trip to {place2}, it sounds amazing",
    "The school is doing a recital for the little ones next month",
    "I painted my nails {colour}, very bold for me haha",
]
DISTRACTOR_REPLIES = [
    "Ha, I know the feeling.",
    "Oh, interesting!",
    "That sounds nice.",
    "Oh wow.",
    "Haha, fair enough!",
    "Poor thing!",
]


NAMES = {
    n
    for pool in (PARTNERS_M, PARTNERS_F, KIDS_M, KIDS_F, SIBLINGS_M, SIBLINGS_F, PET_NAMES)
    for n in pool
}
NAMES |= {f[0] for f in FRIENDS} | {f[1] for f in FRIENDS}


# ---- time ------------------------------------------------------------------------------
def _fmt(d: datetime) -> str:
    return f"{d.day} {d:%B %Y}"


def _last_weekday(d: datetime, wd: int) -> datetime:
    return d - timedelta(days=(d.weekday() - wd) % 7 or 7)


def _next_weekday(d: datetime, wd: int) -> datetime:
    return d + timedelta(days=(wd - d.weekday()) % 7 or 7)


def _next_month(d: datetime) -> str:
    return (d.replace(day=1) + timedelta(days=32)).strftime("%B %Y")


When = Callable[[datetime], str]


def _past(rng: random.Random, week: bool = True) -> tuple[str, When]:
    """A relative past time phrase and how it resolves against the session date."""
    k = rng.randrange(8 if week else 7)
    wd = rng.randrange(7)
    if k == 0:
        return "yesterday", lambda d: _fmt(d - timedelta(days=1))
    if k == 1:
        return "last night", lambda d: _fmt(d - timedelta(days=1))
    if k == 2:
        return "two days ago", lambda d: _fmt(d - timedelta(days=2))
    if k == 3:
        return "last weekend", lambda d: f"the weekend of {_fmt(_last_weekday(d, 5))}"
    if k == 4:
        return f"last {WEEKDAYS[wd]}", lambda d: _fmt(_last_weekday(d, wd))
    if k == 5:
        return f"on {WEEKDAYS[wd]}", lambda d: _fmt(_last_weekday(d, wd))
    if k == 6:
        return "this morning", lambda d: _fmt(d)
    return "last week", lambda d: f"the week before {_fmt(d)}"


def _future(rng: random.Random) -> tuple[str, When]:
    k = rng.randrange(6)
    wd = rng.randrange(5)
    if k == 0:
        return "next week", lambda d: f"the week after {_fmt(d)}"
    if k == 1:
        return "next month", _next_month
    if k == 2:
        return f"next {WEEKDAYS[wd]}", lambda d: _fmt(_next_weekday(d, wd))
    if k == 3:
        return "in two weeks", lambda d: f"around {_fmt(d + timedelta(days=14))}"
    if k == 4:
        return (
            "this weekend",
            lambda d: f"the weekend of {_fmt(d + timedelta(days=(5 - d.weekday()) % 7))}",
        )
    return "tomorrow", lambda d: _fmt(d + timedelta(days=1))


def _a(noun: str) -> str:
    return ("an " if noun[0] in "aeioAEIO" or noun.startswith("HR") else "a ") + noun


def _season(d: datetime) -> str:
    return [
        "Winter",
        "Winter",
        "Spring",
        "Spring",
        "Spring",
        "Summer",
        "Summer",
        "Summer",
        "Autumn",
        "Autumn",
        "Autumn",
        "Winter",
    ][d.month - 1]


# ---- generation ------------------------------------------------------------------------
Turn = tuple[int, str, str]  # (speaker 0|1, text, evidence tag or "")


@dataclass
class _Ep:
    arc: str
    step: int
    teller: int
    turns: list[Turn]
    mood: str = "good"  # the listener's reaction after the last turn: good | bad | none


@dataclass
class _Q:
    category: str
    text: str
    tags: list[str]
    answer: str | Callable[[dict[str, datetime]], str]


@dataclass
class _Gen:
    rng: random.Random
    people: list[dict]
    eps: list[_Ep] = field(default_factory=list)
    qs: list[_Q] = field(default_factory=list)
    arc_kind: dict[str, str] = field(default_factory=dict)
    scope: dict[str, object] = field(default_factory=dict)  # template values of the episode at hand
    deck: list[tuple[str, list[tuple[int, str]]]] = field(
        default_factory=list
    )  # small talk to come
    used: list[object] = field(default_factory=list)  # facts already given to someone

    # -- helpers
    def c(self, items):  # noqa: ANN001, ANN201 - random choice
        return self.rng.choice(items)

    def u(self, items):  # noqa: ANN001, ANN201 - a choice not made before in this conversation
        item = self.rng.choice([x for x in items if x not in self.used])
        self.used.append(item)
        return item

    def turn_text(self, tag: str) -> str:
        """What an episode turn said (before any wrapping), for an answer."""
        return next(text for e in self.eps for _, text, t in e.turns if t == tag)

    def ctx(self, i: int, **extra: object) -> dict[str, object]:
        """Template values for a turn said by friend i (to friend 1 - i)."""
        p, q = self.people[i], self.people[1 - i]
        he, him, his = PRON[p["g"]]
        out: dict[str, object] = dict(
            me=p["short"],
            o=self.c([q["short"], q["short"], q["full"]]),
            O=q["full"],
            he=he,
            him=him,
            his=his,
            He=he.capitalize(),
            partner=p["partner"],
            prel=p["prel"],
            city=p["city"],
            opartner=q["partner"],
        )
        out.update(self.scope)
        out.update(extra)
        return out

    def name(self, i: int) -> str:
        p = self.people[i]
        return p["short"] if self.rng.random() < 0.15 else p["full"]

    def say(self, who: int, template: str | list[str], tag: str = "", **extra: object) -> Turn:
        text = template if isinstance(template, str) else self.c(template)
        return (who, text.format(**self.ctx(who, **extra)), tag)

    def ep(
        self,
        arc: str,
        step: int,
        teller: int,
        turns: list[Turn],
        mood: str = "good",
        kind: str = "any",
    ) -> None:
        self.arc_kind.setdefault(arc, kind)
        self.eps.append(_Ep(arc, step, teller, turns, mood))

    def q(
        self,
        category: str,
        texts: list[str],
        tags: list[str],
        answer: str | Callable[[dict[str, datetime]], str],
        i: int,
        **extra: object,
    ) -> None:
        he, him, his = PRON[self.people[i]["g"]]
        o = self.people[1 - i]
        text = self.c(texts).format(X=self.name(i), Y=o["full"], he=he, him=him, his=his, **extra)
        self.qs.append(_Q(category, text, tags, answer))


def _persona(rng: random.Random, friend: tuple[str, str, str], taken: list[str]) -> dict:
    def fresh(pool: list[str]) -> str:
        name = rng.choice([n for n in pool if n not in taken])
        taken.append(name)
        return name

    full, short, g = friend
    pg = rng.choice(["m", "f"]) if rng.random() < 0.2 else ("f" if g == "m" else "m")
    prel = {
        "m": rng.choice(["husband", "husband", "boyfriend", "partner"]),
        "f": rng.choice(["wife", "wife", "girlfriend", "partner"]),
    }[pg]
    kid_genders = [rng.choice("mf") for _ in range(2)]
    sib_g = rng.choice("mf")
    pet_kind = rng.choice(["dog", "dog", "cat"])
    return dict(
        full=full,
        short=short,
        g=g,
        partner=fresh(PARTNERS_M if pg == "m" else PARTNERS_F),
        prel=prel,
        city=rng.choice(CITIES),
        kids=[(fresh(KIDS_M if kg == "m" else KIDS_F), kg) for kg in kid_genders],
        sib=(
            fresh(SIBLINGS_M if sib_g == "m" else SIBLINGS_F),
            "brother" if sib_g == "m" else "sister",
            sib_g,
            rng.choice(SIB_CITIES),
        ),
        pet_kind=pet_kind,
        pet=fresh(PET_NAMES),
        pet_g=rng.choice("mf"),
        breed=rng.choice(PETS[pet_kind]["breeds"]),
        hobby=rng.choice(HOBBIES),
        trip=rng.choice(TRIPS),
    )


def _wrap(g: _Gen, turn: Turn, kids: bool, first_turn: bool) -> Turn:
    """Say a fact in passing: a lead-in before it, chat after it (varies the length)."""
    who, text, tag = turn
    rng = g.rng
    if not tag or len(text) < 30 or rng.random() < (0.4 if first_turn else 0.75):
        return turn
    first = text.split(" ", 1)[0].strip(",.!?")
    opened = first.lower() in OPENERS or "—" in text[:25] or ":" in text[:25]
    if first_turn and not opened and rng.random() < 0.6:
        lead = rng.choice(LEADS).format(o=g.ctx(who)["o"])
        if first not in NAMES and not first.startswith("I") or first in ("It", "It's"):
            text = text[0].lower() + text[1:]
        text = lead + text
    if rng.random() < 0.6:
        if not text.endswith(("!", ".", "?")):
            text += rng.choice([".", "!", "!!"])
        pool = TAILS + (TAILS_KIDS if kids else [])
        text += " " + " ".join(rng.sample(pool, rng.choice([1, 1, 2, 3])))
        if rng.random() < 0.15:
            text += " " + rng.choice(LONG_TAILS)
    return (who, text, tag)


# ---- the episodes of one friend --------------------------------------------------------
def _pet(g: _Gen, i: int, adopts: bool) -> None:
    p, o = g.people[i], 1 - i
    kind = p["pet_kind"]
    info = PETS[kind]
    t = f"{i}.pet"
    pet_he, _, pet_his = PRON[p["pet_g"]]
    kw = dict(
        pet=p["pet"],
        breed=p["breed"],
        baby=info["baby"],
        kind=kind,
        pet_he=pet_he,
        pet_his=pet_his,
        shelter=g.c(SHELTERS),
        trick=g.c(info["tricks"]),
        pet_him=PRON[p["pet_g"]][1],
    )
    g.scope = kw
    if adopts:
        g.ep(
            f"{t}",
            0,
            i,
            [
                g.say(
                    i,
                    [
                        "We've been talking about getting a {baby} — the kids keep begging and {partner} is finally on board",
                        "I keep looking at the {shelter} website, there's a {breed} {baby} there I can't stop thinking about",
                        "Thinking about getting a {kind}. {partner} says it's a lot of work, but I really want one",
                    ],
                    f"{t}.consider",
                ),
                g.say(
                    o, ["Ooh, do it! A {baby} would be so fun", "You should totally do it, {o}!"]
                ),
                g.say(
                    i,
                    [
                        "Haha we'll see",
                        "I think it's going to happen, honestly",
                        "Watch this space!",
                    ],
                ),
            ],
            mood="none",
        )
        when, wfn = _past(g.rng)
        g.ep(
            t,
            1,
            i,
            [
                g.say(
                    i,
                    [
                        "We adopted a {breed} {baby} from the {shelter} {when}!",
                        "Big news: we brought home a little {breed} {baby} {when}, from the {shelter}",
                        "So... we did it. We adopted a {baby} {when}! A {breed}, from the {shelter}",
                    ],
                    f"{t}.adopt",
                    when=when,
                ),
                g.say(
                    o,
                    [
                        "No way!! What did you name {pet_him}?",
                        "Omg {o}, that's amazing! What's the name?",
                        "Aww! Name? Pics please!",
                    ],
                    f"{t}.nameq",
                ),
                g.say(
                    i,
                    [
                        "We went with {pet}!",
                        "{pet}! The kids picked it",
                        "{pet} — it just suited {pet_him}",
                        "{pet}, after a lot of arguing haha",
                    ],
                    f"{t}.namea",
                ),
            ],
        )
        g.ep(
            t,
            2,
            i,
            [
                g.say(
                    i,
                    [
                        "{pet} learned {trick} {when}, I'm so proud",
                        "Guess who learned {trick}? {pet}! Took us two weeks",
                    ],
                    f"{t}.trick",
                    when=_past(g.rng)[0],
                ),
                g.say(o, ["Good {pet}! Such a smart {baby}", "Haha, genius {baby}!"]),
            ],
        )
        if g.rng.random() < 0.6:
            g.ep(t, 3, i, [g.say(i, info["fun"], f"{t}.fun", when=_past(g.rng)[0])])
            g.q(
                "multi-hop",
                [
                    "What has {pet} been up to since {X} adopted {pet_him}?",
                    "What has {X}'s new {syn} learned or gotten into?",
                ],
                [f"{t}.trick", f"{t}.fun"],
                f"learned {kw['trick']}; {g.turn_text(f'{t}.fun')}",
                i,
                pet=p["pet"],
                pet_him=kw["pet_him"],
                syn=info["syn"],
            )
        g.q(
            "single",
            [
                "What did {X} name {his} new {baby}?",
                "What is {X}'s {kind} called?",
                "What's the name of the {syn} {X} adopted?",
            ],
            [f"{t}.nameq", f"{t}.namea"],
            p["pet"],
            i,
            baby=info["baby"],
            kind=kind,
            syn=info["syn"],
        )
        g.q(
            "temporal",
            [
                "When did {X} adopt {pet}?",
                "When did {X} get {his} {baby}?",
                "When did {X} bring the {syn} home from the shelter?",
            ],
            [f"{t}.adopt"],
            lambda at, t=t, wfn=wfn: wfn(at[f"{t}.adopt"]),
            i,
            pet=p["pet"],
            baby=info["baby"],
            syn=info["syn"],
        )
        g.q(
            "single",
            ["What trick has {pet} learned?", "What has {X}'s {syn} learned to do?"],
            [f"{t}.trick"],
            kw["trick"],
            i,
            pet=p["pet"],
            syn=info["syn"],
        )
        g.q(
            "open",
            ["Why did {X} decide to get a pet?", "Was {X}'s family keen on getting an animal?"],
            [f"{t}.consider"],
            "the kids begged / the partner came round",
            i,
        )
        return
    # an old pet, mentioned in three sessions
    ail = g.u(AILMENTS)
    when, wfn = _past(g.rng)
    g.ep(
        t,
        0,
        i,
        [
            g.say(
                i,
                [
                    "Sorry, my {kind} {pet} just walked across the keyboard",
                    "My {breed} {pet} has been so clingy this week, {pet_he} follows me everywhere",
                    "I'm writing this with {pet}, my {kind}, asleep on my lap, so I can't move",
                ],
                f"{t}.intro",
            ),
            g.say(
                o, ["Haha give {pet} a scratch from me!", "Aww, {pet}! How old is {pet_he} now?"]
            ),
            g.say(
                i, ["Six, but acts like a baby", "Will do haha", "Nearly eight! Still a goofball"]
            ),
        ],
        mood="none",
    )
    g.ep(
        t,
        1,
        i,
        [
            g.say(
                i,
                [
                    "Had to take {pet} to the vet {when} — {ail}, but {pet_he}'s fine now",
                    "Rough week, {pet} had {ail}. We were at the vet {when}, lots of medicine now",
                ],
                f"{t}.vet",
                when=when,
                ail=ail,
            ),
            g.say(
                o, ["Oh no, poor {pet}! Glad {pet_he}'s ok", "Poor baby! Give {pet} a hug from me"]
            ),
        ],
        mood="none",
    )
    g.ep(t, 2, i, [g.say(i, info["fun"], f"{t}.fun", when=_past(g.rng)[0])])
    g.q(
        "single",
        [
            "What is {X}'s {kind} called?",
            "What's the name of {X}'s pet?",
            "What kind of pet does {X} have?",
        ],
        [f"{t}.intro"],
        f"{p['pet']} ({kind})",
        i,
        kind=kind,
    )
    g.q(
        "temporal",
        ["When did {X} take {pet} to the vet?", "When was {pet} at the vet?"],
        [f"{t}.vet"],
        lambda at, t=t, wfn=wfn: wfn(at[f"{t}.vet"]),
        i,
        pet=p["pet"],
    )
    g.q(
        "single",
        [
            "What was wrong with {pet} when {X} went to the vet?",
            "Why did {X}'s {kind} need the vet?",
        ],
        [f"{t}.vet"],
        ail,
        i,
        pet=p["pet"],
        kind=kind,
    )
    g.q(
        "multi-hop",
        [
            "What has been going on with {X}'s {kind} lately?",
            "What has {pet} been through this year?",
        ],
        [f"{t}.vet", f"{t}.fun"],
        f"{ail} at the vet; {g.turn_text(f'{t}.fun')}",
        i,
        kind=kind,
        pet=p["pet"],
    )


def _job(g: _Gen, i: int, changes: bool) -> None:
    p, o = g.people[i], 1 - i
    t = f"{i}.job"
    if not changes:
        title, lines, promo = g.u(STABLE_JOBS)
        p["job"] = title
        g.ep(
            t,
            0,
            i,
            [
                g.say(i, lines[0], f"{t}.j1"),
                g.say(
                    o,
                    [
                        "Oof, that sounds exhausting. Get some rest!",
                        "You're a hero, {o}, seriously",
                    ],
                ),
            ],
            mood="none",
        )
        when, wfn = _past(g.rng)
        g.ep(
            t,
            1,
            i,
            [
                g.say(
                    i,
                    [
                        "I found out {when} — I got the promotion! I'm going to be {promo}",
                        "Guess who's the new {promo}? They told me {when}!",
                    ],
                    f"{t}.promo",
                    when=when,
                    promo=promo,
                ),
                g.say(o, ["Congrats {o}!! So well deserved", "YES! I knew you'd get it"]),
            ],
        )
        demanding = [f"{t}.j1"]
        if g.rng.random() < 0.5:
            g.ep(t, 2, i, [g.say(i, lines[1], f"{t}.j2")], mood="none")
            demanding.append(f"{t}.j2")
        g.q(
            "open",
            [
                "Does {X} find {his} work demanding?",
                "Is {X}'s job tiring?",
                "How hard is {X}'s job on {him}?",
            ],
            demanding,
            "yes, long tiring shifts",
            i,
        )
        g.q(
            "single",
            ["What does {X} do for a living?", "What is {X}'s job?", "What's {X}'s line of work?"],
            [f"{t}.j1"],
            title,
            i,
        )
        g.q(
            "temporal",
            ["When did {X} get promoted?", "When did {X} find out about {his} promotion?"],
            [f"{t}.promo"],
            lambda at, t=t, wfn=wfn: wfn(at[f"{t}.promo"]),
            i,
        )
        g.q(
            "multi-hop",
            [
                "What was {X}'s job before the promotion, and what is {he} now?",
                "How has {X}'s career moved on?",
            ],
            [f"{t}.j1", f"{t}.promo"],
            f"{title} -> {promo}",
            i,
        )
        return
    (old, co), (new, co2) = g.u(CHANGE_JOBS), g.u(CHANGE_JOBS)
    p["job"] = new
    gripe = g.c(OLD_JOB_GRIPES)
    g.ep(
        t,
        0,
        i,
        [
            g.say(
                i,
                [
                    "Work's been rough. Being {a_old} at {co} used to be fun, but {gripe}",
                    "I'm so done with my job at {co}. I've been {a_old} there for years and {gripe}",
                ],
                f"{t}.old",
                old=old,
                co=co,
                gripe=gripe,
                a_old=_a(old),
            ),
            g.say(
                o,
                [
                    "Ugh, sorry {o}. Have you thought about looking for something else?",
                    "That sucks. Are you thinking of leaving?",
                ],
                f"{t}.oldq",
            ),
            g.say(
                i,
                [
                    "Honestly, yeah. I've started updating my CV",
                    "Maybe. I've been quietly looking around",
                ],
                f"{t}.olda",
            ),
        ],
        mood="bad",
        kind="early",
    )
    when, wfn = _future(g.rng)
    g.ep(
        t,
        1,
        i,
        [
            g.say(
                i,
                [
                    "I have a job interview at {co2} {when}! It's for {a_new} position",
                    "So I applied to {co2} and they want to interview me {when}, for {new}",
                ],
                f"{t}.iv",
                co2=co2,
                new=new,
                when=when,
                a_new=_a(new),
            ),
            g.say(o, ["Good luck!! You'll smash it, {o}", "Ahh exciting! You've got this"]),
        ],
        mood="none",
    )
    g.ep(
        t,
        2,
        i,
        [
            g.say(
                i,
                [
                    "I got the job!! I'm officially {a_new} at {co2}",
                    "First week as {a_new} at {co2} done, and I love it",
                    "Started at {co2} on Monday! The team is great and I'm actually learning again",
                ],
                f"{t}.new",
                co2=co2,
                new=new,
                a_new=_a(new),
            ),
            g.say(o, ["Congrats {o}!! So proud of you", "That's huge! You deserve it"]),
        ],
    )
    h2, h2_doing = g.u(HOBBIES2)
    p["hobby2"] = h2
    day = g.c(WEEKDAYS)
    g.ep(
        t,
        3,
        i,
        [
            g.say(
                i,
                [
                    "Now that I'm not stuck at the office till eight, I've started {doing} on {day}s",
                    "I started {doing} {when}! I finally have evenings free",
                    "New thing: {doing}. I'm terrible but it's so fun",
                ],
                f"{t}.h2",
                doing=h2_doing,
                day=day,
                when=_past(g.rng)[0],
            ),
            g.say(
                o,
                ["Look at you! {h2}, I love that", "Oh fun! I've always wanted to try {h2}"],
                h2=h2,
            ),
        ],
    )
    g.q(
        "single",
        [
            "Where does {X} work now?",
            "Which company does {X} work for these days?",
            "What's {X}'s current job?",
        ],
        [f"{t}.new"],
        f"{new} at {co2}",
        i,
    )
    g.q(
        "multi-hop",
        [
            "What did {X} do before {he} joined {co2}?",
            "What was {X}'s previous job?",
            "How did {X}'s job change this year?",
        ],
        [f"{t}.old", f"{t}.new"],
        f"{old} at {co} -> {new} at {co2}",
        i,
        co2=co2,
    )
    g.q(
        "temporal",
        [
            "When was {X}'s job interview with {co2}?",
            "When did {X} interview at {co2}?",
            "When was {X}'s interview for the new job?",
        ],
        [f"{t}.iv"],
        lambda at, t=t, wfn=wfn: wfn(at[f"{t}.iv"]),
        i,
        co2=co2,
    )
    g.q(
        "multi-hop",
        [
            "Which hobby did {X} start after changing jobs?",
            "What did {X} take up after {he} started at {co2}?",
            "What new activity does {X} have time for since the job switch?",
        ],
        [f"{t}.new", f"{t}.h2"],
        h2,
        i,
        co2=co2,
    )
    g.q(
        "open",
        ["Is {X} happier since changing jobs?", "Did the move to {co2} turn out well for {X}?"],
        [f"{t}.old", f"{t}.new", f"{t}.h2"],
        "yes",
        i,
        co2=co2,
    )
    g.q(
        "open",
        [
            "Why did {X} want to leave {co}?",
            "Was {X} happy in {his} old job?",
            "How did {X} feel about working at {co}?",
        ],
        [f"{t}.old", f"{t}.olda"],
        gripe,
        i,
        co=co,
    )


def _hobby(g: _Gen, i: int) -> None:
    p, o = g.people[i], 1 - i
    h = p["hobby"]
    t = f"{i}.hobby"
    day, day2 = g.rng.sample(WEEKDAYS[:6], 2)
    items = g.rng.sample(h["items"], 3)
    when, wfn = _past(g.rng)
    g.ep(
        t,
        0,
        i,
        [
            g.say(
                i,
                [
                    "I finally signed up for the {cls} on {day}s {when}",
                    "Busy week — I signed up for a {cls} {when}, it's {day} evenings",
                    "Guess what, I started a {cls}! First one was {when}. It's every {day}",
                ],
                f"{t}.start",
                cls=h["cls"],
                day=day,
                when=when,
            ),
            g.say(
                o,
                ["Oh fun! How did you get into {name}?", "Ooh, {name}! What made you pick that?"],
                name=h["name"],
            ),
            g.say(i, h["reason"][0].upper() + h["reason"][1:]),
        ],
    )
    moved = g.rng.random() < 0.5
    g.ep(
        t,
        1,
        i,
        [
            g.say(
                i,
                [
                    "I {verb} {item} at my {cls} {when}, it's not perfect but I love it",
                    "My first proper piece from the {cls}: I {verb} {item}!",
                    "So proud of myself, I {verb} {item} this week",
                ],
                f"{t}.m1",
                verb=h["verb"],
                item=items[0],
                cls=h["cls"],
                when=_past(g.rng)[0],
            ),
            g.say(
                o, ["Send a picture!!", "That's amazing, {o}! You're so talented", "Wow, already?!"]
            ),
        ],
    )
    g.ep(
        t,
        2,
        i,
        [
            g.say(
                i,
                [
                    "{name} update: I {verb} {item}. The teacher said it's my best so far",
                    "Still loving {name}. This week I {verb} {item}, took forever",
                ]
                if not moved
                else [
                    "{name} update: they moved the class to {day2}s, which is annoying, but I {verb} {item}",
                    "Oh, my {cls} is on {day2}s now, they changed the schedule. Anyway, I {verb} {item}!",
                ],
                f"{t}.m2",
                name=h["name"],
                verb=h["verb"],
                item=items[1],
                cls=h["cls"],
                day2=day2,
            ),
            g.say(o, ["You're getting so good at this", "Haha I need one of those"]),
        ],
    )
    if g.rng.random() < 0.5:
        g.ep(
            t,
            3,
            i,
            [
                g.say(
                    i,
                    [
                        "There's an end-of-term show for the {cls} and my teacher wants to include my work!",
                        "I think I'm going to keep going with {name} after this term, it's become my favourite part of the week",
                    ],
                    f"{t}.show",
                    cls=h["cls"],
                    name=h["name"],
                ),
            ],
        )
    g.q(
        "single",
        [
            "What day is {X}'s {cls}?",
            "On which day does {X} go to {name}?",
            "What evening does {X} have {his} {name} class?",
        ],
        [f"{t}.m2"] if moved else [f"{t}.start"],
        day2 if moved else day,
        i,
        cls=h["cls"],
        name=h["name"],
    )
    g.q("multi-hop", h["q_made"], [f"{t}.m1", f"{t}.m2"], f"{items[0]}, {items[1]}", i)
    g.q(
        "temporal",
        [
            "When did {X} sign up for the {cls}?",
            "When did {X} start {name}?",
            "When did {X} begin taking {name} lessons?",
        ],
        [f"{t}.start"],
        lambda at, t=t, wfn=wfn: wfn(at[f"{t}.start"]),
        i,
        cls=h["cls"],
        name=h["name"],
    )
    g.q(
        "open",
        ["Would {X} appreciate {gift} as a present?", "Is {gift} a good gift idea for {X}?"],
        [f"{t}.start", f"{t}.m1", f"{t}.m2"],
        f"yes, {p['short']} is into {h['name']}",
        i,
        gift=h["gift"],
    )


def _kids(g: _Gen, i: int, recital: bool) -> None:
    p, o = g.people[i], 1 - i
    t = f"{i}.kids"
    (k1, g1), (k2, g2) = p["kids"]
    he1, him1, his1 = PRON[g1]
    he2 = PRON[g2][0]
    i1, i2 = g.rng.sample(INSTRUMENTS, 2)
    when, _ = _past(g.rng)
    g.ep(
        t,
        0,
        i,
        [
            g.say(
                i,
                [
                    "{k1} started {i1} lessons {when}, the house is so loud now haha",
                    "My {rel1} {k1} has taken up the {i1}! {He1} practises every night after dinner",
                    "{k1} came home from school and announced {he1} wants to learn {i1}, so now we have a teacher coming on Tuesdays",
                ],
                f"{t}.k1",
                k1=k1,
                i1=i1,
                when=when,
                he1=he1,
                He1=he1.capitalize(),
                rel1="son" if g1 == "m" else "daughter",
            ),
            g.say(
                o,
                ["Aww! Is {he1} enjoying it?", "Haha earplugs time! Does {he1} like it?"],
                he1=he1,
            ),
            g.say(
                i,
                ["Loves it, honestly", "So far! Ask me again in a month", "Yes, {he1}'s obsessed"],
                he1=he1,
            ),
        ],
        mood="none",
    )
    g.ep(
        t,
        1,
        i,
        [
            g.say(
                i,
                [
                    "Now {k2} wants to be like {k1}, so {he2}'s doing {i2} lessons too. Send help",
                    "{k2} picked the {i2} at school this term. Between that and {k1}'s practice our house is a concert hall",
                    "We got {k2} a {i2} — a secondhand one from a neighbour, {he2} hasn't put it down",
                ],
                f"{t}.k2",
                k1=k1,
                k2=k2,
                i2=i2,
                he2=he2,
            ),
            g.say(o, ["A little family band!", "Haha, you'll need a bigger house, {o}"]),
        ],
        mood="none",
    )
    g.q(
        "multi-hop",
        [
            "What instruments do {X}'s kids play?",
            "Which instruments are {X}'s children learning?",
            "What music lessons do {X}'s kids take?",
        ],
        [f"{t}.k1", f"{t}.k2"],
        f"{k1}: {i1}, {k2}: {i2}",
        i,
    )
    g.q(
        "single",
        ["What instrument does {k2} play?", "Which instrument did {k2} pick up?"],
        [f"{t}.k2"],
        i2,
        i,
        k2=k2,
    )
    g.q(
        "open",
        [
            "Is {X}'s home a noisy, musical one?",
            "Would {X}'s family enjoy a trip to a music shop?",
            "Are {X}'s kids into music?",
        ],
        [f"{t}.k1", f"{t}.k2"],
        "yes, both kids play",
        i,
    )
    if not recital:
        sport = g.c(SPORTS)
        ewhen, efn = _past(g.rng)
        g.ep(
            f"{t}.sport",
            0,
            i,
            [
                g.say(
                    i,
                    [
                        "{k1} joined the {sport} team at school, practice is twice a week",
                        "We signed {k1} up for {sport}, {he1} loves it",
                    ],
                    f"{t}.s1",
                    k1=k1,
                    sport=sport,
                    he1=he1,
                ),
            ],
        )
        g.ep(
            f"{t}.sport",
            1,
            i,
            [
                g.say(
                    i,
                    [
                        "{k1} won a medal at {his1} first {sport} competition {when}!",
                        "Proud parent moment: {k1} got player of the match at {sport} {when}",
                    ],
                    f"{t}.s2",
                    k1=k1,
                    sport=sport,
                    his1=his1,
                    when=ewhen,
                ),
                g.say(o, ["Go {k1}!!", "That's amazing! Tell {k1} congrats from me"], k1=k1),
            ],
        )
        g.q(
            "single",
            ["What sport does {k1} play?", "Which team did {X}'s kid join?"],
            [f"{t}.s1"],
            sport,
            i,
            k1=k1,
        )
        g.q(
            "temporal",
            ["When did {k1} win the {sport} medal?", "When was {k1}'s big {sport} moment?"],
            [f"{t}.s2"],
            lambda at, t=t, efn=efn: efn(at[f"{t}.s2"]),
            i,
            k1=k1,
            sport=sport,
        )
        return
    piece = g.c(PIECES)
    fri = WEEKDAYS.index("Friday")
    g.ep(
        f"{t}.recital",
        0,
        i,
        [
            g.say(
                i,
                [
                    "{k1}'s first {i1} recital is coming up, it's on a Thursday evening at the school",
                    "Save the date haha — {k1} has a {i1} recital at school, Thursday night",
                ],
                f"{t}.rann",
                k1=k1,
                i1=i1,
            ),
            g.say(o, ["Aw, {k1} will be great!", "Exciting! Is {he1} nervous?"], k1=k1, he1=he1),
        ],
        mood="none",
        kind="chain",
    )
    g.ep(
        f"{t}.recital",
        1,
        i,
        [
            g.say(
                i,
                [
                    "Oh, actually the recital moved to Friday — the school double-booked the hall",
                    "Update on {k1}'s recital: they moved it to Friday, so {partner} can come after all",
                ],
                f"{t}.rcor",
                k1=k1,
            ),
            g.say(o, ["Ha, Friday is better anyway", "Good, that works out then"]),
        ],
        mood="none",
    )
    g.ep(
        f"{t}.recital",
        2,
        i,
        [
            g.say(
                i,
                [
                    "{k1}'s recital was on Friday — {he1} played {piece} and didn't miss a note!",
                    "The recital on Friday went so well. {k1} played {piece}, I cried like a baby",
                ],
                f"{t}.rafter",
                k1=k1,
                he1=he1,
                piece=piece,
            ),
            g.say(o, ["So proud of {k1}!", "Ahh that's so sweet. Tell {k1} I said bravo"], k1=k1),
        ],
    )
    g.q(
        "single",
        [
            "What day was {k1}'s recital in the end?",
            "Which day did {k1}'s recital move to?",
            "What day did the school recital get changed to?",
        ],
        [f"{t}.rcor"],
        "Friday",
        i,
        k1=k1,
    )
    g.q(
        "single",
        ["What did {k1} play at {his1} recital?", "Which piece did {k1} perform?"],
        [f"{t}.rafter"],
        piece,
        i,
        k1=k1,
        his1=his1,
    )
    g.q(
        "multi-hop",
        [
            "What instrument does {k1} play, and what did {he1} perform at the recital?",
            "Which piece did {X}'s {instr} player perform?",
        ],
        [f"{t}.k1", f"{t}.rafter"],
        f"{i1}, {piece}",
        i,
        k1=k1,
        he1=he1,
        instr=i1,
    )
    g.q(
        "temporal",
        ["When was {k1}'s {i1} recital?", "When did {k1} perform at the school recital?"],
        [f"{t}.rafter"],
        lambda at, t=t: _fmt(
            _last_weekday(at[f"{t}.rafter"], fri)
            if at[f"{t}.rafter"].weekday() != fri
            else at[f"{t}.rafter"]
        ),
        i,
        k1=k1,
        i1=i1,
    )


def _trip(g: _Gen, i: int) -> None:
    p, o = g.people[i], 1 - i
    tr = p["trip"]
    t = f"{i}.trip"
    place = g.u(tr["places"])
    p["trip_place"] = place
    hl = g.c(tr["hl"])
    g.ep(
        t,
        0,
        i,
        [
            g.say(i, tr["plan"], f"{t}.plan", place=place, when=_future(g.rng)[0]),
            g.say(o, ["So jealous! Who's going?", "Ooh {place}! Is it just you two?"], place=place),
            g.say(
                i,
                [
                    "Just me, {partner} and the kids",
                    "Just the two of us, finally",
                    "The whole gang, even my mom",
                ]
                if p["kids_on"]
                else [
                    "Just me and {partner}",
                    "Just the two of us, finally",
                    "Me, {partner} and my mom!",
                ],
                f"{t}.who",
            ),
        ],
    )
    when, wfn = g.c(
        [
            ("last week", lambda d: f"the week before {_fmt(d)}"),
            ("last weekend", lambda d: f"the weekend of {_fmt(_last_weekday(d, 5))}"),
        ]
    )
    g.ep(
        t,
        1,
        i,
        [
            g.say(
                i, tr["back"], f"{t}.back", place=place, hl=hl, Hl=hl[0].upper() + hl[1:], when=when
            ),
            g.say(
                o, ["That sounds amazing! Send pics", "Aww, I'm so glad you had a good time, {o}"]
            ),
            g.say(
                i,
                [
                    "Will do! We got back {when}, I'm still unpacking",
                    "Sending now! We only got home {when}",
                ],
                f"{t}.back2",
                when=when,
            ),
        ],
    )
    g.q("single", tr["q_where"], [f"{t}.plan", f"{t}.back"], place, i)
    g.q(
        "temporal",
        tr["q_when"],
        [f"{t}.back", f"{t}.back2"],
        lambda at, t=t, wfn=wfn: wfn(at[f"{t}.back"]),
        i,
        place=place,
    )
    g.q(
        "single",
        [
            "What was the best part of {X}'s trip to {place}?",
            "What did {X} love most about {place}?",
        ],
        [f"{t}.back"],
        hl,
        i,
        place=place,
    )
    if tr["kind"] in ("camping", "hiking"):
        g.q(
            "open",
            [
                "Is {X} an outdoorsy person?",
                "Would {X} enjoy a weekend in the wilderness?",
                "Does {X} like nature trips?",
            ],
            [f"{t}.plan", f"{t}.back"],
            f"yes, {tr['kind']} in {place}",
            i,
        )
    g.q(
        "multi-hop",
        [
            "Who went with {X} to {place}, and what was the highlight?",
            "Who did {X} travel with on the {kind} trip and how was it?",
        ],
        [f"{t}.plan", f"{t}.who", f"{t}.back"],
        f"{g.turn_text(f'{t}.who')}; {hl}",
        i,
        place=place,
        kind=tr["kind"],
    )


def _events(g: _Gen, i: int) -> None:
    p, o = g.people[i], 1 - i
    kinds = g.rng.sample(["race", "concert", "group", "volunteer"], 2)
    causes: list[str] = []
    for kind in kinds:
        t = f"{i}.{kind}"
        when, wfn = _past(g.rng)
        while kind == "race" and when == "last night":
            when, wfn = _past(g.rng)
        tm = lambda at, t=t, wfn=wfn: wfn(at[t])  # noqa: E731
        if kind == "race":
            dist, cause = g.c(DISTANCES), g.u(CAUSES)
            mins = {
                "5k": g.rng.randint(24, 38),
                "10k": g.rng.randint(48, 70),
                "half marathon": g.rng.randint(105, 150),
            }[dist]
            g.ep(
                t,
                0,
                i,
                [
                    g.say(
                        i,
                        [
                            "I ran a charity {dist} {when} for {cause}!",
                            "Did my first {dist} {when}, raising money for {cause}",
                        ],
                        t,
                        dist=dist,
                        cause=cause,
                        when=when,
                    ),
                    g.say(o, ["Amazing! How did it go?", "Wow {o}! What was your time?"], f"{t}.q"),
                    g.say(
                        i,
                        [
                            "Finished in {mins} minutes, not bad for my first one!",
                            "{mins} minutes! My legs are dead",
                        ],
                        f"{t}.a",
                        mins=mins,
                    ),
                ],
            )
            g.q(
                "temporal",
                ["When did {X} run the charity {dist}?", "When did {X} do the race for {cause}?"],
                [t],
                tm,
                i,
                dist=dist,
                cause=cause,
            )
            g.q(
                "single",
                ["What was {X}'s time in the {dist}?", "How fast did {X} run the charity race?"],
                [f"{t}.q", f"{t}.a"],
                f"{mins} minutes",
                i,
                dist=dist,
            )
            causes.append(t)
        elif kind == "concert":
            band = g.u(BANDS)
            g.ep(
                t,
                0,
                i,
                [
                    g.say(
                        i,
                        [
                            "{partner} and I saw {band} {when} — best concert ever",
                            "We went to see {band} live {when}! I still have no voice",
                        ],
                        t,
                        band=band,
                        when=when,
                    ),
                    g.say(
                        o,
                        ["So jealous! Did they play the hits?", "Ahh I love them! How were they?"],
                    ),
                    g.say(
                        i, ["Everything! We danced the whole time", "Incredible. Worth every penny"]
                    ),
                ],
            )
            g.q(
                "temporal",
                ["When did {X} go to the {band} concert?", "When did {X} see {band} live?"],
                [t],
                tm,
                i,
                band=band,
            )
            g.q(
                "single",
                ["Which band did {X} see in concert?", "Who did {X} and {his} {prel} see live?"],
                [t],
                band,
                i,
                prel=p["prel"],
            )
        elif kind == "group":
            grp, feel = g.u(GROUPS)
            g.ep(
                t,
                0,
                i,
                [
                    g.say(
                        i,
                        [
                            "I went to {a_grp} {when}. {Feel}",
                            "I finally went to the {grp} {when} — {feel}",
                        ],
                        t,
                        grp=grp,
                        a_grp=_a(grp),
                        feel=feel,
                        Feel=feel[0].upper() + feel[1:],
                        when=when,
                    ),
                    g.say(
                        o,
                        [
                            "I'm really proud of you for going, {o}",
                            "That's so brave. I'm glad it helped",
                        ],
                    ),
                ],
                mood="none",
            )
            g.q(
                "temporal",
                ["When did {X} go to the {grp}?", "When did {X} attend the support group?"],
                [t],
                tm,
                i,
                grp=grp,
            )
        else:
            place = g.u(VOLUNTEER)
            g.ep(
                t,
                0,
                i,
                [
                    g.say(
                        i,
                        [
                            "I volunteered at the {place} {when}, it felt so good to help",
                            "Spent the morning at the {place} {when}, volunteering with a friend. I want to do it monthly",
                        ],
                        t,
                        place=place,
                        when=when,
                    ),
                    g.say(
                        o,
                        [
                            "That's so lovely, {o}",
                            "You're the best. I should come with you next time",
                        ],
                    ),
                ],
            )
            g.q(
                "temporal",
                ["When did {X} volunteer at the {place}?", "When did {X} help out at the {place}?"],
                [t],
                tm,
                i,
                place=place,
            )
            g.q(
                "single",
                ["Where did {X} volunteer?", "Which place did {X} help out at?"],
                [t],
                place,
                i,
            )
            causes.append(t)
    if causes:  # the charity race and the volunteering
        g.q(
            "open",
            [
                "What causes does {X} care about?",
                "What does {X} do to give back to the community?",
                "Is {X} someone who cares about helping others?",
            ],
            causes,
            "; ".join(g.turn_text(c) for c in causes),
            i,
        )
    if "group" in kinds:
        g.q(
            "open",
            [
                "How has {X} been looking after {his} wellbeing?",
                "Has {X} looked for support with anything lately?",
            ],
            [f"{i}.group"],
            g.turn_text(f"{i}.group"),
            i,
        )


def _family(g: _Gen, i: int) -> None:
    p, o = g.people[i], 1 - i
    t = f"{i}.fam"
    gift = g.u(GIFTS)
    g.ep(
        f"{t}.gift",
        0,
        i,
        [
            g.say(
                i,
                [
                    "{partner} surprised me with {gift} {when}, I had no idea!",
                    "My {prel} {partner} got me {gift} {when}, just because",
                ],
                f"{t}.gift",
                gift=gift,
                when=_past(g.rng)[0],
            ),
            g.say(o, ["Aww, {opartner} is a keeper!", "That's so sweet of {opartner}"]),
        ],
    )
    g.q(
        "single",
        ["What's the name of {X}'s {prel}?", "Who is {X}'s {prel}?"],
        [f"{t}.gift"],
        p["partner"],
        i,
        prel=p["prel"],
    )
    g.q(
        "single",
        ["What did {partner} surprise {X} with?", "What gift did {X} get from {his} {prel}?"],
        [f"{t}.gift"],
        gift,
        i,
        partner=p["partner"],
        prel=p["prel"],
    )
    sib, rel, sg, scity = p["sib"]
    when, wfn = _future(g.rng)
    g.ep(
        f"{t}.sib",
        0,
        i,
        [
            g.say(
                i,
                [
                    "My {rel} {sib} is flying in from {scity} {when}!",
                    "{sib} is coming to visit {when} — my {rel}, the one in {scity}",
                ],
                f"{t}.sib",
                sib=sib,
                rel=rel,
                scity=scity,
                when=when,
            ),
            g.say(
                o,
                [
                    "Oh nice! How long is {sib_he} staying?",
                    "Fun! You two haven't seen each other in ages, right?",
                ],
                f"{t}.sibq",
                sib_he=PRON[sg][0],
            ),
            g.say(i, ["Just a week, but I'll take it", "Almost a year! I can't wait"], f"{t}.siba"),
        ],
    )
    g.q(
        "single",
        [
            "Where does {X}'s {rel} live?",
            "Where was {sib} flying in from?",
            "Which city is {X}'s {rel} based in?",
        ],
        [f"{t}.sib"],
        scity,
        i,
        rel=rel,
        sib=sib,
    )
    g.q(
        "temporal",
        ["When was {X}'s {rel} visiting?", "When did {sib} come to visit {X}?"],
        [f"{t}.sib"],
        lambda at, t=t, wfn=wfn: wfn(at[f"{t}.sib"]),
        i,
        rel=rel,
        sib=sib,
    )
    # family outings, two sessions, plus the trip: an open question on what the family does
    outs = [g.u(OUTINGS), g.u(OUTINGS)]
    for n, out in enumerate(outs):
        g.ep(
            f"{t}.out{n}",
            0,
            i,
            [
                g.say(
                    i,
                    [
                        "We took the kids to {out} {when}, they had a blast",
                        "Family day {when}: we went to {out}. Exhausting but fun",
                        "{partner} and I took everyone to {out} {when}",
                    ]
                    if p["kids_on"]
                    else [
                        "{partner} and I went to {out} {when}, with my nieces",
                        "Family day {when}: {partner}, my parents and I went to {out}",
                    ],
                    f"{t}.out{n}",
                    out=out,
                    when=_past(g.rng)[0],
                ),
                g.say(
                    o,
                    ["That sounds like the perfect day", "Aww, fun! I love doing stuff like that"],
                ),
            ],
        )
    g.q(
        "open",
        [
            "What kind of activities does {X} enjoy with {his} family?",
            "What does {X} like to do on family days?",
            "How does {X}'s family spend their free time together?",
        ],
        [f"{t}.out0", f"{t}.out1", f"{i}.trip.back"],
        f"{outs[0]}, {outs[1]}, the {p['trip']['kind']} trip",
        i,
    )


def _moving(g: _Gen, i: int) -> None:
    p, o = g.people[i], 1 - i
    t = f"{i}.move"
    city2 = g.c([c for c in MOVE_CITIES if c != p["city"]])
    stay = g.rng.random() < 0.5
    g.ep(
        t,
        0,
        i,
        [
            g.say(
                i,
                [
                    "{partner} got offered a job in {city2}, so we might move",
                    "Big question at home: {partner} has an offer in {city2}. Moving would be huge",
                ],
                f"{t}.m1",
                city2=city2,
            ),
            g.say(
                o,
                ["Whoa, big decision! Would you want to?", "Wait, you'd leave {city}?!"],
                city=p["city"],
            ),
            g.say(
                i,
                [
                    "I don't know. I love it here in {city}, the kids have all their friends here",
                    "Part of me wants an adventure, part of me loves {city} too much",
                ],
                f"{t}.m2",
            ),
        ],
        mood="none",
    )
    g.ep(
        t,
        1,
        i,
        [
            g.say(
                i,
                [
                    "We decided to stay in {city} after all — the kids love their school and I'd miss everyone too much",
                    "Update: we're not moving. {partner} turned down the {city2} job, we just love it here",
                ]
                if stay
                else [
                    "It's official — we're moving to {city2} in the spring!",
                    "We said yes to {city2}! Scary but exciting, we move in a few months",
                ],
                f"{t}.m3",
                city2=city2,
            ),
            g.say(
                o,
                ["Honestly I'm relieved haha, I'd miss you", "Good call, {o}"]
                if stay
                else [
                    "Wow! I'll miss you, but I'm so excited for you",
                    "Ahh, a new chapter! Proud of you",
                ],
            ),
        ],
    )
    g.q(
        "open",
        [
            "Would {X} likely move to {city2}?",
            "Is {X} going to relocate to {city2}?",
            "Is {X}'s family leaving {city}?",
        ],
        [f"{t}.m1", f"{t}.m2", f"{t}.m3"],
        "no, staying" if stay else "yes, moving",
        i,
        city2=city2,
        city=p["city"],
    )
    g.q(
        "single", ["Where does {X} live?", "Which city is {X} based in?"], [f"{t}.m2"], p["city"], i
    )


def _birthday(g: _Gen, i: int) -> None:
    o = 1 - i
    t = f"{i}.bday"
    rest, act, age = g.u(RESTAURANTS), g.u(BDAY_AFTER), g.rng.randint(29, 46)
    g.ep(
        t,
        0,
        i,
        [
            g.say(
                i,
                [
                    "My birthday was yesterday! {partner} took me to {rest}",
                    "Yesterday was my birthday, we had dinner at {rest}, so good",
                ],
                f"{t}.b1",
                rest=rest,
            ),
            g.say(
                o,
                ["Happy belated birthday!! How old?", "Happy birthday, {o}!! How old are we now?"],
                f"{t}.b2",
            ),
            g.say(
                i,
                ["{age}, don't remind me", "{age}! Feels weird", "{age}. Still feel 25 though"],
                f"{t}.b3",
                age=age,
            ),
        ],
        kind="short",
    )
    g.ep(
        t,
        1,
        i,
        [
            g.say(
                i,
                [
                    "I {act} yesterday! Terrifying and amazing",
                    "So yesterday I {act}, finally crossed it off my list",
                ],
                f"{t}.after",
                act=act,
            ),
            g.say(o, ["You're so brave!", "Ok that's so cool, {o}"]),
        ],
    )
    g.q(
        "temporal",
        [
            "What did {X} do the week after {his} birthday?",
            "What adventure did {X} have a few days after turning {age}?",
        ],
        [f"{t}.b1", f"{t}.after"],
        act,
        i,
        age=age,
    )
    g.q(
        "single",
        [
            "Where did {X} go for {his} birthday dinner?",
            "Which restaurant did {X} celebrate {his} birthday at?",
        ],
        [f"{t}.b1"],
        rest,
        i,
    )
    g.q(
        "single",
        ["How old did {X} turn?", "What age is {X} now?"],
        [f"{t}.b2", f"{t}.b3"],
        str(age),
        i,
    )
    g.q(
        "temporal",
        ["When is {X}'s birthday?", "When did {X} celebrate {his} birthday?"],
        [f"{t}.b1"],
        lambda at, t=t: _fmt(at[f"{t}.b1"] - timedelta(days=1)),
        i,
    )


def _home_and_book(g: _Gen, i: int) -> None:
    o = 1 - i
    t = f"{i}.home"
    room, colour = g.u(ROOMS), g.u(COLOURS)
    g.ep(
        t,
        0,
        i,
        [
            g.say(
                i,
                [
                    "We painted the {room} {colour} {when}, it looks so much bigger now",
                    "Spent the whole weekend painting — the {room} is {colour} now!",
                ],
                t,
                room=room,
                colour=colour,
                when=_past(g.rng)[0],
            ),
            g.say(o, ["Ooh {colour}, bold! Pics?", "Love that colour"], colour=colour),
        ],
    )
    g.q(
        "single",
        ["What colour did {X} paint the {room}?", "What colour is {X}'s {room} now?"],
        [t],
        colour,
        i,
        room=room,
    )
    t = f"{i}.book"
    title, author, blurb = g.u(BOOKS)
    g.ep(
        t,
        0,
        i,
        [
            g.say(
                i,
                [
                    "Have you read {title}? You'd love it, {o}",
                    "Ok you have to read {title}, I just finished it",
                ],
                f"{t}.rec",
                title=title,
            ),
            g.say(o, ["No! Who's it by?", "Haven't! Who wrote it?"], f"{t}.q"),
            g.say(
                i,
                ["{author}. {Blurb}", "{author} — {blurb}"],
                f"{t}.a",
                author=author,
                blurb=blurb,
                Blurb=blurb[0].upper() + blurb[1:],
            ),
        ],
    )
    g.ep(
        t,
        1,
        o,
        [
            g.say(
                o,
                [
                    "I started {title} like you said — you were right, I can't put it down",
                    "Finished {title}! Thank you for the recommendation, {o}, I loved it",
                ],
                f"{t}.read",
                title=title,
            ),
            g.say(i, ["Yay! I knew you'd like it", "Right?! Let's do a book club of two haha"]),
        ],
    )
    g.q(
        "single",
        ["What book did {X} recommend to {Y}?", "Which novel did {X} tell {Y} to read?"],
        [f"{t}.rec"],
        title,
        i,
    )
    g.q(
        "multi-hop",
        [
            "Did {Y} enjoy the book {X} recommended?",
            "What did {Y} think of {X}'s book recommendation?",
        ],
        [f"{t}.rec", f"{t}.read"],
        "loved it",
        i,
    )
    g.q(
        "single",
        ["Who wrote the book {X} recommended?", "Who is the author of the book {X} suggested?"],
        [f"{t}.rec", f"{t}.q", f"{t}.a"],
        author,
        i,
    )


def _cross(g: _Gen) -> None:
    """Questions that span both friends or contrast them."""
    p0, p1 = g.people
    g.q(
        "multi-hop",
        ["What pets do {X} and {Y} have?", "Which animals do {X} and {Y} own?"],
        [
            t
            for i, p in enumerate(g.people)
            for t in ([f"{i}.pet.adopt", f"{i}.pet.namea"] if p["adopter"] else [f"{i}.pet.intro"])
        ],
        f"{p0['pet']} and {p1['pet']}",
        0,
    )
    g.q(
        "multi-hop",
        ["Where did {X} and {Y} each travel this year?", "Which trips did {X} and {Y} take?"],
        ["0.trip.back", "1.trip.back"],
        f"{p0['trip_place']} and {p1['trip_place']}",
        0,
    )
    g.q(
        "open",
        ["Who is more likely to enjoy a {h} workshop, {X} or {Y}?"],
        ["0.hobby.start", "0.hobby.m1"],
        p0["full"],
        0,
        h=p0["hobby"]["name"],
    )


def _distractors(g: _Gen) -> None:
    for n, tmpl in enumerate(g.rng.sample(DISTRACTORS, g.rng.randint(5, 8))):
        who = g.rng.randrange(2)
        p = g.people[who]
        text = tmpl.format(
            breed=g.c(PETS["dog"]["breeds"]),
            place=g.c(TRIPS[0]["places"]),
            company=g.c(CHANGE_JOBS)[1],
            partner=p["partner"],
            instrument=g.c(INSTRUMENTS),
            hobby=g.c(HOBBIES)["name"],
            place2=g.c(TRIPS[3]["places"]),
            colour=g.c(COLOURS),
        )
        g.ep(
            f"d{n}", 0, who, [(who, text, ""), (1 - who, g.c(DISTRACTOR_REPLIES), "")], mood="none"
        )


# ---- placement and assembly ------------------------------------------------------------
def _dates(rng: random.Random, n: int) -> list[datetime]:
    day = datetime(rng.randint(2022, 2024), rng.randint(1, 12), rng.randint(1, 28), tzinfo=UTC)
    out = []
    for _ in range(n):
        hour = (
            rng.choice([7, 8, 12, 13, 17, 18, 19, 20, 21, 22])
            if day.weekday() < 5
            else rng.randint(9, 22)
        )
        out.append(day.replace(hour=hour, minute=rng.randint(0, 59)))
        day += timedelta(days=rng.randint(2, 9) if rng.random() < 0.55 else rng.randint(10, 22))
    return out


def _place(g: _Gen, n: int, dates: list[datetime]) -> list[list[_Ep]]:
    rng = g.rng
    arcs: dict[str, list[_Ep]] = {}
    for e in g.eps:
        arcs.setdefault(e.arc, []).append(e)
    plan: list[list[_Ep]] = [[] for _ in range(n)]
    for arc, steps in arcs.items():
        steps.sort(key=lambda e: e.step)
        k = len(steps)
        kind = g.arc_kind[arc]
        if kind == "short":  # two sessions 1-8 days apart (the week after)
            ok = [s for s in range(n - 1) if 1 <= (dates[s + 1] - dates[s]).days <= 8]
            s0 = rng.choice(ok) if ok else rng.randrange(n - 1)
            where = [s0, s0 + 1]
        elif kind == "chain":  # consecutive-ish sessions
            s0 = rng.randint(0, n - 1 - 2 * (k - 1))
            where = [s0]
            for _ in range(k - 1):
                where.append(where[-1] + rng.randint(1, 2))
        elif kind == "early":
            s0 = rng.randint(0, n // 4)
            where = [s0, *sorted(rng.sample(range(s0 + 2, n), k - 1))]
        else:  # anywhere, spread; the least loaded of a few draws
            draws = [sorted(rng.sample(range(n), k)) for _ in range(4)]
            where = min(draws, key=lambda w: max(len(plan[s]) for s in w))
        for s, e in zip(where, steps, strict=True):
            plan[s].append(e)
    for items in plan:
        rng.shuffle(items)
    return plan


def _session(g: _Gen, items: list[_Ep], when: datetime) -> list[Turn]:
    rng = g.rng
    people = g.people
    has_kids = [bool(p["kids_on"]) for p in people]
    extra = dict(weekday=WEEKDAYS[when.weekday()], month=when.strftime("%B"), season=_season(when))

    def line(who: int, options: list[str], **kw: object) -> Turn:
        ctx = g.ctx(who, **extra, **kw)
        ctx["Busy"] = str(ctx.get("busy", "")).capitalize()
        return (who, rng.choice(options).format(**ctx), "")

    def busy(who: int) -> str:
        pool = [b for b in BUSY if when.weekday() >= 5 or "weekend" not in b]
        return rng.choice(pool + (BUSY_KIDS if has_kids[who] else []))

    a = rng.randrange(2)
    greet = [
        x
        for x in GREET
        if not (("Morning" in x and when.hour >= 12) or ("Evening" in x and when.hour < 17))
    ]
    turns = [line(a, greet), line(1 - a, GREET_BACK, busy=busy(1 - a))]
    if rng.random() < 0.4:
        turns.append(line(a, GREET_3))
    target = rng.randint(12, 26)
    chat_room = max(0, target - 4 - sum(len(e.turns) + 1 for e in items))

    def small_talk() -> list[Turn]:
        nonlocal chat_room
        x = 1 - turns[-1][0] if rng.random() < 0.7 else rng.randrange(2)
        if len(g.deck) < 3:  # one deck per conversation: repeats come late and reworded
            g.deck += rng.sample(SMALL, len(SMALL))
        for needs, lines in g.deck:
            if needs == "kids1" and not has_kids[1 - x]:
                continue
            g.deck.remove((needs, lines))
            out = [
                line(
                    x if w == 0 else 1 - x,
                    txt.split(" || "),
                    show=rng.choice(SHOWS),
                    dish=rng.choice(DISHES),
                )
                for w, txt in lines
            ]
            chat_room -= len(out)
            return out
        return []

    for e in items:
        if chat_room > 0 and rng.random() < 0.5:
            turns += small_talk()
        for n, turn in enumerate(e.turns):
            turns.append(_wrap(g, turn, has_kids[turn[0]], first_turn=n == 0))
        listener = 1 - e.teller
        if e.mood == "none" and turns[-1][0] == e.teller and rng.random() < 0.6:
            turns.append(line(listener, NEUTRAL))
        elif e.mood != "none" and turns[-1][0] == e.teller:
            turns.append(line(listener, GOOD if e.mood == "good" else BAD))
            if chat_room > 2 and rng.random() < 0.25:
                turns += [line(listener, FOLLOW_Q), line(e.teller, FOLLOW_A)]
                chat_room -= 2
    while len(turns) < target - 2:
        chat = small_talk()
        if not chat:
            break
        turns += chat
    b = rng.randrange(2)
    reasons = REASONS + (REASONS_KIDS if has_kids[b] else [])
    turns += [
        line(b, BYE, reason=rng.choice(reasons).format(partner=people[b]["partner"])),
        line(1 - b, BYE_BACK),
    ]
    return turns


def _conversation(
    index: int, rng: random.Random, friends: list[tuple[str, str, str]]
) -> Conversation:
    taken = [f[0] for f in friends] + [f[1] for f in friends]
    people = [_persona(rng, f, taken) for f in friends]
    people[1]["hobby"] = rng.choice([h for h in HOBBIES if h is not people[0]["hobby"]])
    g = _Gen(rng, people)
    changer, adopter, mover, bday, recital = (rng.randrange(2) for _ in range(5))
    kids_of = rng.choice([(True, True), (True, False), (False, True)])
    for i in (0, 1):
        people[i]["kids_on"] = kids_of[i]
        people[i]["adopter"] = i == adopter
    for i in (0, 1):
        _pet(g, i, adopts=i == adopter)
        g.scope = {}
        _job(g, i, changes=i == changer)
        _hobby(g, i)
        if kids_of[i]:
            _kids(g, i, recital=(i == recital) or not kids_of[1 - i])
        _trip(g, i)
        _events(g, i)
        _family(g, i)
        if i == mover:
            _moving(g, i)
        if i == bday:
            _birthday(g, i)
        if rng.random() < 0.6:
            _home_and_book(g, i)
    _cross(g)
    _distractors(g)

    n = rng.randint(18, 28)
    dates = _dates(rng, n)
    plan = _place(g, n, dates)
    conv = Conversation(
        name=f"dlg{index + 1}-{people[0]['full'].lower()}-{people[1]['full'].lower()}"
    )
    pos: dict[str, list[int]] = {}
    for s, items in enumerate(plan):
        if conv.rows:
            conv.rows.append(Row("marker", MARKER, dates[s] - timedelta(minutes=1)))
        t = dates[s]
        for who, text, tag in _session(g, items, dates[s]):
            t += timedelta(seconds=rng.randint(15, 150) + len(text) // 2)
            conv.rows.append(
                Row("user" if who == 0 else "assistant", f"{people[who]['full']}: {text}", t)
            )
            if tag:
                pos.setdefault(tag, []).append(len(conv.rows) - 1)
    at = {tag: conv.rows[p[0]].created_at for tag, p in pos.items()}
    questions = [q for q in g.qs if all(tag in pos for tag in q.tags)]
    missing = [q.text for q in g.qs if q not in questions]
    cap = rng.randint(46, 60)
    if len(questions) > cap:  # keep the order, drop a random few
        keep = sorted(rng.sample(range(len(questions)), cap))
        questions = [questions[k] for k in keep]
    for q in questions:
        evidence = sorted({r for tag in q.tags for r in pos[tag]})
        answer = q.answer if isinstance(q.answer, str) else q.answer(at)
        conv.questions.append(Question(q.text, q.category, evidence, answer))
    assert not missing, missing
    return conv


def build(seed: int = 7, conversations: int = 6) -> list[Conversation]:
    """The benchmark: `conversations` two-friend conversations, deterministic for a seed."""
    rng = random.Random(seed)
    friends = (
        rng.sample(FRIENDS, 2 * conversations)
        if 2 * conversations <= len(FRIENDS)
        else [rng.choice(FRIENDS) for _ in range(2 * conversations)]
    )
    return [
        _conversation(i, random.Random(rng.getrandbits(64)), friends[2 * i : 2 * i + 2])
        for i in range(conversations)
    ]


def as_turns(conv: Conversation) -> Conversation:
    """The conversation as strictly alternating turns, LoCoMo's shape: a speaker's
    consecutive messages within a session become one row ("Deborah: All the time. I had
    one last Sunday. We booked a campsite at Banff for next month"), at the first one's
    time; evidence follows its messages into their turn. Longer rows that mix a reaction, a
    fact and a question back are what real logs hold, and they dilute a row's vector."""
    out = Conversation(conv.name + "-turns")
    where: list[int] = []  # old position -> new position
    for row in conv.rows:
        last = out.rows[-1] if out.rows else None
        if last is not None and row.role != "marker" and row.role == last.role:
            _, _, text = row.content.partition(": ")
            joiner = " " if last.content.endswith((".", "!", "?")) else ". "
            out.rows[-1] = Row(last.role, last.content + joiner + text, last.created_at)
        else:
            out.rows.append(row)
        where.append(len(out.rows) - 1)
    for q in conv.questions:
        evidence = sorted({where[p] for p in q.evidence})
        out.questions.append(Question(q.text, q.category, evidence, q.answer))
    return out


def build_turns(seed: int = 7, conversations: int = 6) -> list[Conversation]:
    """`build`, each conversation `as_turns`."""
    return [as_turns(c) for c in build(seed, conversations)]


__all__ = ["CATEGORIES", "Conversation", "Question", "Row", "as_turns", "build", "build_turns"]


def _report(seed: int, samples: bool) -> str:
    import hashlib

    convs = build(seed)
    out = [f"seed {seed}"]
    total = {c: 0 for c in CATEGORIES}
    for conv in convs:
        sessions = 1 + sum(r.role == "marker" for r in conv.rows)
        counts = {c: sum(q.category == c for q in conv.questions) for c in CATEGORIES}
        for c in CATEGORIES:
            total[c] += counts[c]
        span = (conv.rows[-1].created_at - conv.rows[0].created_at).days
        out.append(
            f"  {conv.name}: {len(conv.rows)} rows, {sessions} sessions over {span} days, "
            f"{len(conv.questions)} questions {counts}"
        )
    out.append(f"  total questions {sum(total.values())} {total}")
    digest = hashlib.sha256(
        repr([(c.name, c.rows, c.questions) for c in convs]).encode()
    ).hexdigest()
    out.append(f"  digest {digest[:16]}")
    if samples:
        conv = convs[0]
        starts = [0] + [k + 1 for k, r in enumerate(conv.rows) if r.role == "marker"]
        for s in (1, len(starts) // 2):
            end = starts[s + 1] - 1 if s + 1 < len(starts) else len(conv.rows)
            out.append(
                f"\n--- {conv.name} session {s + 1} ({conv.rows[starts[s]].created_at:%a %d %b %Y %H:%M}) ---"
            )
            out += [f"  [{k}] {conv.rows[k].content}" for k in range(starts[s], end)]
        out.append("")
        rng = random.Random(seed)
        for c in CATEGORIES:
            pool = [q for cv in convs[:2] for q in cv.questions if q.category == c]
            for q in rng.sample(pool, min(3, len(pool))):
                conv = next(cv for cv in convs if q in cv.questions)
                out.append(f"[{c}] {q.text}  ->  {q.answer}")
                out += [
                    f"      [{k}] {conv.rows[k].created_at:%d %b %Y} {conv.rows[k].content}"
                    for k in q.evidence
                ]
    return "\n".join(out)


if __name__ == "__main__":
    import sys

    seeds = [int(a) for a in sys.argv[1:]] or [7, 8]
    for n, sd in enumerate(seeds):
        first = _report(sd, samples=n == 0)
        assert first == _report(sd, samples=n == 0), "not deterministic"
        print(first)
        print()
