"""A person at the keyboard, for tests and benchmarks of what nixx's own work costs them:
25 messages of one conversation (a beekeeper planning a course with her assistant: names,
small talk, facts said in passing, a question about something said earlier) and the
pauses between them — the seconds a person reads an answer before typing, 1 to 12,
drawn the same way every run (`pauses`)."""

from __future__ import annotations

import random
from collections.abc import Iterator

PAUSE_SECONDS = (1.0, 12.0)

MESSAGES = [
    "Hi! I'm Maaike, I keep bees in Ghent and I want to run a beginners' course in spring.",
    "The course would be six Saturday mornings at the community garden near the Coupure.",
    "How many people can one beekeeper teach at a hive without chaos, do you think?",
    "Good point about veils. We have eight spare veils and three full suits.",
    "My partner Joris says we should charge forty euros. Is that too much for Ghent?",
    "Ha, fair. The city gives a small grant for nature education, maybe that helps.",
    "What should the first Saturday cover? I was thinking hive anatomy and safety.",
    "We'll use a Dadant hive for the demo, that's what most Belgian keepers use.",
    "Could you draft a short checklist for opening a hive with beginners?",
    "Nice. Add 'light the smoker before you put gloves on', people always forget.",
    "Week three I'd like to do swarm prevention. May is swarm season here.",
    "Do you know a simple way to explain queen cells to people who never saw one?",
    "I love the comparison with a waiting list. I'll steal that.",
    "Joris found a supplier in Lokeren for foundation wax, cheaper than online.",
    "What do I do if someone in the group turns out to be allergic to stings?",
    "The community garden has a first-aid kit but no epinephrine pen.",
    "OK, I'll ask every participant about allergies in the sign-up form.",
    "For the last Saturday I'd like a small honey tasting. Three local honeys.",
    "Linden, chestnut and a spring flower honey from our own hives.",
    "Should I print handouts or just send a PDF after each session?",
    "A PDF it is. Can you remind me what we planned for week three?",
    "And how many veils did I say we have?",
    "Let's make the sign-up form today. What fields does it need?",
    "Thanks. Last thing: a name for the course. Something not too cute.",
    "'Bees on Saturday' is perfect. Thank you for all the help!",
]


def pauses(seed: int = 38) -> Iterator[float]:
    """The seconds before each next message (uniform over `PAUSE_SECONDS`, seeded)."""
    draw = random.Random(seed)
    while True:
        yield draw.uniform(*PAUSE_SECONDS)
