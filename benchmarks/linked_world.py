"""A seeded world of linked entity pages: people, companies and meetings as markdown files
in people/, companies/ and meetings/, linking each other with markdown links (relative,
root-relative, with or without .md), [[wikilinks]] (by title or file name, some with an
alias) and bare slugs, in prose that states who works at, invested in, advises, founded
or attended what — in the words web pages use ("the founder and CEO of", "runs engineering
at", "raised a Series A led by"), several per relation, some facts only on the object's
page — mixed with distractor prose (mentions that state no relation, title-case
headlines, dated anecdotes, names of places and products), and one index page that links
every page (a hub). ``held_out=True`` adds wordings no relation cue was written for.

The hidden facts give the gold answers of the questions "Who works at / invested in /
advises / attended X?".

    from linked_world import generate
    world = generate(seed=7)
    world.write(Path("/tmp/pages"))
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

FIRST = ("Mia Noah Ava Liam Zoe Omar Lena Ivan Nora Theo Ruth Hugo Sara Amir Ines Yuki Pablo Greta Kofi Anya "
         "Felix Maya Jonas Lucia Tariq Elif Owen Freya Diego Hana Milan Ada Ravi Clara Sven Leila Marco Ines Petra "
         "Tomas").split()
LAST = ("Brown Okafor Lindqvist Moreau Tanaka Novak Haddad Schmidt Rossi Costa Nakamura Fischer Dubois Kowalski "
        "Jansen Petrov Silva Andersen Oyelaran Varga Keller Larsen Romero Quist Bakker Ibrahim Sato Weber").split()
CO_A = ("Acme Northwind Bluefin Copperleaf Helix Lumen Quarry Tidewater Ironbark Saltmarsh Kestrel Meridian Orchid "
        "Basalt Juniper Pinecrest Halcyon Vantage Corvid Solace Driftwood Emberly Granite Aurora Fennel").split()
CO_B = "Robotics Labs Health Freight Analytics Energy Foods Bio Systems Security Capital Mobility Studio".split()
PLACES = "Lisbon Rotterdam Nairobi Montreal Osaka Tallinn Porto Austin Gdansk Valparaiso".split()
PRODUCTS = "Atlas Beacon Harbor Nimbus Lattice Prism Relay Sextant".split()
# People and events with no page of their own: dated anecdotes name them.
OUTSIDERS = ["Dana Whitfield", "Rafael Ortega", "Grace Holloway", "Kenji Mori", "Olga Sorokina", "Samuel Adeyemi"]
EVENTS = ["Web Summit", "Money20/20 Europe", "Slush Helsinki", "Collision Toronto"]
ANECDOTES = [
    "On {day} {month} {first} met {outsider} at {event} in {place}.",
    "On {day} {month} {first} presented {product} at {event}.",
    "- Led Series B round in {month} {year}.",
    "- Raised a seed round on {day} {month} {year} with {outsider}.",
    "In {month} {year} {first} hired {outsider} as a contractor.",
]
MONTHS = ["March", "June", "October", "January"]
ROLES = "CTO|head of sales|staff engineer|product lead|data scientist|CFO|designer|COO|VP Engineering".split("|")
MEETING_KINDS = ["board meeting", "quarterly review", "investor update", "planning offsite", "customer summit",
                 "hiring sync", "strategy day"]
QUARTERS = ["Q1", "Q2", "Q3", "Q4"]

# Title-case headlines of the kind that fooled the capitalised-word entity rule.
HEADLINES = ["Why Most Startups Fail", "Led Series B Round", "How We Think About Hiring", "What Changed This Year",
             "Lessons From The Field", "Notes On Pricing", "Open Questions", "Early Days", "Key Numbers",
             "Big Bets For Next Year", "Where We Go From Here", "Recent Press Coverage"]
FILLER = [
    "The team moved to a bigger office last spring and still argues about the coffee machine.",
    "Revenue grew steadily, mostly from mid-sized customers in Europe.",
    "Most of the roadmap is about reliability rather than new features.",
    "The product was rewritten twice before it found its first paying customers.",
    "Hiring has been slower than planned because of a tight market for engineers.",
    "A Board Deck from last year is still the best summary of the strategy.",
    "Customers mostly praise the support team and complain about onboarding.",
    "Pricing changed in the autumn, with a cheaper plan for small teams.",
]
PERSON_FILLER = [
    "Outside work, {first} runs long distances and reads science fiction.",
    "{first} grew up in {place} and studied economics before moving into tech.",
    "{first} writes a small newsletter about engineering management.",
    "Friends describe {first} as patient, direct and very hard to beat at chess.",
    "{first} spoke at a conference in {place} about distributed systems.",
]


@dataclass
class Page:
    path: str  # relative to the world's root, e.g. "people/mia-brown-0.md"
    title: str
    kind: str  # person | company | meeting
    lines: list[str] = field(default_factory=list)
    frontmatter: bool = False

    def text(self) -> str:
        head = (["---", f"title: {self.title}", f"type: {self.kind}", "---", ""] if self.frontmatter
                else [f"# {self.title}", ""])
        return "\n".join(head + self.lines).rstrip() + "\n"


@dataclass
class Question:
    relation: str  # works_at | invested_in | advises | attended
    text: str
    target: str  # page path the question names
    gold: list[str]  # person page paths


@dataclass
class World:
    pages: dict[str, Page]
    facts: dict[str, set[tuple[str, str]]]  # relation -> {(person path, target path)}
    questions: list[Question]
    names: set[str]  # every proper name the generator wrote (people, companies, places, products)
    lookups: list[Question] = field(default_factory=list)  # "What does X build?": X's own page answers

    def write(self, root: Path) -> None:
        for page in self.pages.values():
            out = root / page.path
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(page.text(), encoding="utf-8")


class _Refs:
    """Every reference form a page author might use, chosen at random."""

    def __init__(self, rng: random.Random):
        self.rng = rng

    def __call__(self, src: Page, dst: Page, shown: str | None = None) -> str:
        shown = shown or dst.title
        stem = dst.path[:-3]
        rel = _relative(src.path, dst.path)
        forms = [
            f"[{shown}]({rel})",
            f"[{shown}]({rel[:-3]})",
            f"[{shown}](/{dst.path})",
            f"[{shown}]({stem})",
            f"[[{dst.title}]]",
            f"[[{stem.rsplit('/', 1)[1]}|{shown}]]",
            f"[[{dst.title}|{shown}]]",
            f"{shown} ({stem})",
        ]
        return self.rng.choice(forms)


def _relative(src: str, dst: str) -> str:
    up = src.count("/")
    return "../" * up + dst if src.split("/")[0] != dst.split("/")[0] else dst.rsplit("/", 1)[1]


# Each relation as web pages state it: (on the person's page, on the object's page). {t}
# is the object page's own title. generate(held_out=True) adds HELD_OUT's wordings.
PHRASINGS = {
    "works_at": (
        ["{p} works at {c} as {role}.", "{p} is the {role} of {c}.", "{p} joined {c} in {year} as {role}.",
         "Since {year}, {p} has been {role} at {c}.", "{p} is employed by {c}.", "{p} leads engineering at {c}.",
         "{p} runs sales at {c}.", "{p} heads up design at {c}.", "{p} is a partner at {c}."],
        ["{p} works here as {role}.", "{p} ({role}) joined in {year}.", "Our {role} is {p}.",
         "{p} is on the team, as {role}.", "{p} runs engineering.", "{t} hired {p} as {role} in {year}."]),
    "invested_in": (
        ["{p} invested in {c} in {year}.", "{p} is an early investor in {c}.", "{p} backed {c} at the seed stage.",
         "{p} led the Series A of {c}.", "{p} holds an angel stake in {c}.", "{p} led the seed round of {c}.",
         "{p} participated in the Series B of {c}.", "{p} wrote one of the first cheques into {c}."],
        ["Investors include {p}.", "{p} invested in the seed round.", "The Series A was led by {p}.",
         "{p} backed the company early.", "{t} raised a Series A led by {p}.", "{p} participated in the seed round.",
         "Backed by {p} and others."]),
    "advises": (
        ["{p} advises {c} on {topic}.", "{p} is an advisor to {c}.", "{p} sits on the advisory board of {c}.",
         "{p} mentors the founders of {c}.", "{p} coaches the leadership team of {c}."],
        ["{p} advises the founders on {topic}.", "Advisors: {p}.", "{p} is one of our advisors.",
         "{p} mentors our engineering leads."]),
    "founded": (
        ["{p} founded {c} in {year}.", "{p} co-founded {c}.", "{p} is the founder and CEO of {c}.",
         "{p} is a co-founder of {c}."],
        ["Founded in {year} by {p}.", "{p} co-founded the company.", "{t} was co-founded in {year} by {p}.",
         "{p} founded the company in {year}."]),
}
# Wordings no cue was written for, used only on held-out seeds: how the zero-LLM rules
# do on text they were not tuned on.
HELD_OUT = {
    "works_at": (["{p} spends her days building {c}'s product.", "{p} is on the payroll at {c}.",
                  "{p} serves as {role} at {c}."],
                 ["{p} runs engineering here.", "Say hello to {p}, who looks after our customers."]),
    "invested_in": (["{p} put money into {c} early on.", "{p} came in on the pre-seed of {c}."],
                    ["{p} joined the round as an angel.", "Early money came from {p}."]),
    "advises": (["{p} is a sounding board for the founders of {c}."],
                ["{p} helps the founders think through {topic}."]),
    "founded": (["{p} started {c} in {year}."], ["{p} started the company in {year}."]),
}
MENTIONS = ["{p} once gave a talk at {c}.", "{p} wrote a blog post comparing {c} to its rivals.",
            "{p} was quoted in an article about {c}.", "{p} met people from {c} at a conference in {place}."]
MENTIONS_CO = ["{p} gave a talk at our demo day.", "An article by {p} covered the launch.",
               "{p} visited the office in {place} once."]
ATTENDED = ["{p} attended {m}.", "{p} was at {m}.", "{p} joined {m} and presented the numbers."]
TOPICS = ["pricing", "hiring", "security", "go-to-market", "fundraising", "logistics"]


def generate(seed: int = 7, people: int = 110, companies: int = 60, meetings: int = 70, held_out: bool = False) -> World:
    rng = random.Random(seed)
    phrasings = {rel: (own + HELD_OUT[rel][0], theirs + HELD_OUT[rel][1]) if held_out else (own, theirs)
                 for rel, (own, theirs) in PHRASINGS.items()}
    ref = _Refs(rng)
    pages: dict[str, Page] = {}
    names: set[str] = set(PLACES) | set(PRODUCTS) | set(OUTSIDERS) | set(EVENTS)
    names |= {e.rsplit(" ", 1)[0] for e in EVENTS}  # "Slush Helsinki" may be read as "Slush"

    used_names: set[str] = set()
    persons: list[Page] = []
    for i in range(people):
        while True:
            name = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
            if name not in used_names:
                break
        used_names.add(name)
        slug = name.lower().replace(" ", "-")
        path = f"people/{slug}-{i % 3}.md" if rng.random() < 0.5 else f"people/{slug}.md"
        persons.append(Page(path, name, "person", frontmatter=rng.random() < 0.3))
        names.add(name)
    cos: list[Page] = []
    used_cos: set[str] = set()
    while len(cos) < companies:
        name = f"{rng.choice(CO_A)} {rng.choice(CO_B)}"
        if name in used_cos:
            continue
        used_cos.add(name)
        cos.append(Page(f"companies/{name.lower().replace(' ', '-')}.md", name, "company", frontmatter=rng.random() < 0.3))
        names.add(name)
    for page in persons + cos:
        pages[page.path] = page

    facts: dict[str, set[tuple[str, str]]] = {r: set() for r in ("works_at", "invested_in", "advises", "founded",
                                                                     "attended", "mentions")}
    body: dict[str, list[str]] = {p.path: [] for p in persons + cos}

    def state(rel: str, person: Page, co: Page, own: list[str], theirs: list[str]) -> None:
        """A fact is stated on the person's page, the company's page, or both."""
        where = rng.choice(["person", "company", "company", "both"])
        values = dict(role=rng.choice(ROLES), year=rng.randint(2012, 2024), topic=rng.choice(TOPICS),
                      place=rng.choice(PLACES))
        if where in ("person", "both"):
            body[person.path].append(rng.choice(own).format(p=person.title.split()[0], c=ref(person, co), **values))
        if where in ("company", "both"):
            line = rng.choice(theirs).format(p=ref(co, person), t=co.title, **values)
            body[co.path].append(line[:1].upper() + line[1:])
        facts[rel].add((person.path, co.path))

    for person in persons:
        if rng.random() < 0.85:
            state("works_at", person, rng.choice(cos), *phrasings["works_at"])
        for co in rng.sample(cos, rng.choice([0, 0, 1, 1, 2])):
            state("invested_in", person, co, *phrasings["invested_in"])
        for co in rng.sample(cos, rng.choice([0, 0, 1, 1])):
            state("advises", person, co, *phrasings["advises"])
        if rng.random() < 0.15:
            state("founded", person, rng.choice(cos), *phrasings["founded"])
        for co in rng.sample(cos, rng.choice([0, 1, 1, 2])):
            state("mentions", person, co, MENTIONS, MENTIONS_CO)

    # Meetings: a company's meeting with some of the people around it (and a guest or two).
    meeting_pages: list[Page] = []
    for i in range(meetings):
        co = rng.choice(cos)
        year = rng.randint(2022, 2025)
        title = f"{co.title} {rng.choice(QUARTERS)} {year} {rng.choice(MEETING_KINDS)}"
        if any(m.title == title for m in meeting_pages):
            continue
        path = f"meetings/{year}-{i:02d}-{title.lower().replace(' ', '-')}.md"
        page = Page(path, title, "meeting", frontmatter=rng.random() < 0.3)
        around = [p for p in persons if any((p.path, co.path) in facts[r] for r in facts)]
        pool = around + rng.sample(persons, 3)
        attendees = rng.sample(pool, min(len(pool), rng.randint(2, 5)))
        absent = rng.choice([p for p in persons if p not in attendees])
        refs = [ref(page, p) for p in attendees]
        style = rng.randrange(3)
        if style == 0:
            lines = ["Attendees: " + ", ".join(refs), ""]
        elif style == 1:
            lines = ["## Present", ""] + [f"- {r}" for r in refs] + [""]
        else:
            lines = [f"{', '.join(refs[:-1])} and {refs[-1]} met to go through the numbers." if len(refs) > 1
                     else f"{refs[0]} went through the numbers.", ""]
        lines += [f"## {rng.choice(HEADLINES)}", "", rng.choice(FILLER),
                  f"Meeting held for {ref(page, co)}.",
                  f"{ref(page, absent)} sent apologies and will get the notes.", ""]
        page.lines = lines
        for p in attendees:
            facts["attended"].add((p.path, path))
            if rng.random() < 0.2:
                body[p.path].append(rng.choice(ATTENDED).format(p=p.title.split()[0], m=ref(p, page)))
        meeting_pages.append(page)
        pages[path] = page

    for page in persons:
        first = page.title.split()[0]
        lines = [f"{page.title} is a {rng.choice(ROLES)} based in {rng.choice(PLACES)}.", ""]
        lines += body[page.path]
        lines += ["", f"## {rng.choice(HEADLINES)}", "",
                  rng.choice(PERSON_FILLER).format(first=first, place=rng.choice(PLACES))]
        if rng.random() < 0.4:
            lines.append(f"On {rng.randint(1, 28)} {rng.choice(MONTHS)} {first} demoed "
                         f"{rng.choice(PRODUCTS)} to a room of skeptical engineers.")
        if rng.random() < 0.5:
            lines.append(rng.choice(ANECDOTES).format(
                day=rng.randint(1, 28), month=rng.choice(MONTHS), year=rng.randint(2015, 2024), first=first,
                outsider=rng.choice(OUTSIDERS), event=rng.choice(EVENTS), place=rng.choice(PLACES),
                product=rng.choice(PRODUCTS)))
        if rng.random() < 0.05:  # a page that was never written: a reference that cannot resolve
            lines.append(f"{first} often quotes [{rng.choice(OUTSIDERS)}](../people/{rng.choice(OUTSIDERS).lower().replace(' ', '-')}).")
        page.lines = lines
    for page in cos:
        lines = [f"{page.title} builds {rng.choice(['software', 'hardware', 'services'])} for "
                 f"{rng.choice(['logistics', 'hospitals', 'farms', 'banks', 'retailers'])}, "
                 f"headquartered in {rng.choice(PLACES)}.", ""]
        lines += body[page.path] or ["Little is public about the team yet."]
        lines += ["", f"## {rng.choice(HEADLINES)}", "", rng.choice(FILLER), rng.choice(FILLER),
                  f"The flagship product is called {rng.choice(PRODUCTS)}."]
        if rng.random() < 0.4:
            lines.append(rng.choice(ANECDOTES).format(
                day=rng.randint(1, 28), month=rng.choice(MONTHS), year=rng.randint(2015, 2024), first="The team",
                outsider=rng.choice(OUTSIDERS), event=rng.choice(EVENTS), place=rng.choice(PLACES),
                product=rng.choice(PRODUCTS)))
        if rng.random() < 0.05:
            lines.append(f"See also [[{rng.choice(CO_A)} Holdings]] for the parent company.")
        page.lines = lines

    # A hub: an index page that links every page (as an Obsidian map of content does).
    hub = Page("index.md", "Directory", "index")
    for folder in ("people", "companies", "meetings"):
        hub.lines += [f"## {folder.title()}", ""] + [f"- [[{p.title}]]" for p in pages.values()
                                                      if p.path.startswith(folder)] + [""]
    pages[hub.path] = hub
    questions = _questions(rng, pages, facts)
    lookups = [Question("about", f"What does {co.title} build?", co.path, [co.path]) for co in cos]
    return World(pages, facts, questions, names, lookups)


ASK = {
    "works_at": ["Who works at {x}?", "Who is employed by {x}?", "Which people work for {x}?"],
    "invested_in": ["Who invested in {x}?", "Who are the investors in {x}?", "Who has backed {x}?"],
    "advises": ["Who advises {x}?", "Who are the advisors of {x}?"],
    "attended": ["Who attended the {x}?", "Who was at the {x}?"],
}


# A founder works at what they founded, as the web says it ("Yara Smith, founder of
# Cascade" is on Cascade's team page): the gold of "Who works at X?" holds its founders.
IMPLIED_BY = {"works_at": ("founded",)}


def _questions(rng: random.Random, pages: dict[str, Page], facts) -> list[Question]:
    out = []
    for relation, phrasings in ASK.items():
        by_target: dict[str, list[str]] = {}
        stated = set(facts[relation]).union(*(facts[r] for r in IMPLIED_BY.get(relation, ())))
        for person, target in sorted(stated):
            by_target.setdefault(target, []).append(person)
        for target, gold in sorted(by_target.items()):
            out.append(Question(relation, rng.choice(phrasings).format(x=pages[target].title), target, sorted(gold)))
    return out
