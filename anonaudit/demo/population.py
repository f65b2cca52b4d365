"""A deterministic synthetic population for the demo, the tests and tutorials.

Every person is fictional and made from seeded random choices. For each person in
the release there is one private record (``originals``): a court-case or
medical-note style text with names, dates, places, organisations, case codes and
quasi-identifiers (age, occupation, nationality, a rare event, a hobby), with gold
PII spans. The public ``background`` holds several differently worded documents per
person (a news item, a register entry, a profile), each repeating only some of the
person's attributes, and also people who are not in the release at all.

The design gives every attack real signal and leaves some after sanitization:
the gold spans cover names, codes, dates, places, organisations, nationality and
age and occupation, but not the hobby or the wording of the event, as annotators
of real corpora often leave such details. So an unsanitized record is easy to
re-identify from the background, and suppressing the gold spans removes much, but
not all, of that signal.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from pathlib import Path

from audit.core.data import Corpus, Document, Release, Span, sanitize_corpus

FIRST_NAMES = {
    "F": ["Amira", "Beatrix", "Camille", "Dalia", "Elin", "Farida", "Greta", "Hana", "Ines", "Jolanta",
          "Katarina", "Leonie", "Maren", "Nadia", "Oksana", "Paulina", "Rosalind", "Selin", "Tamsin",
          "Ulla", "Vesna", "Wilhelmina", "Yasmin", "Zofia", "Agnieszka", "Brigitte", "Cosima", "Dorota",
          "Esther", "Fenna"],
    "M": ["Anton", "Bogdan", "Cyril", "Dmitri", "Emre", "Florian", "Goran", "Henrik", "Ilias", "Jarek",
          "Kasimir", "Lorenz", "Matteo", "Nikos", "Orhan", "Piotr", "Quentin", "Rasmus", "Stellan",
          "Tobias", "Umberto", "Valentin", "Wojciech", "Xaver", "Yusuf", "Zoltan", "Arvid", "Branko",
          "Corentin", "Dariusz"],
}
SURNAMES = [
    "Abramowicz", "Baltazar", "Cernak", "Dragomir", "Eriksen", "Falkenrath", "Gruber", "Halloran",
    "Ivanova", "Jankowski", "Kaltenbach", "Lindqvist", "Marinescu", "Novak", "Oberhauser", "Petrakis",
    "Quaranta", "Rautio", "Szabo", "Toivonen", "Urbanek", "Vasquez", "Wieczorek", "Yilmaz", "Zeller",
    "Aaltonen", "Bergstrom", "Castellano", "Demir", "Engstrand", "Ferreira", "Gallagher", "Horvath",
    "Iliescu", "Juhasz", "Kowalczyk", "Lazarov", "Moretti", "Nieminen", "Ostrowski", "Pavlidis",
    "Radulescu", "Sokolova", "Tamminen", "Ulrich", "Varga", "Wallin", "Zielinski", "Albescu", "Brennan",
    "Ciobanu", "Dvorak", "Esposito", "Fischbach", "Grigorescu", "Hakala", "Ionescu", "Jovanovic",
    "Kuznetsov", "Lombardi", "Mikkelsen", "Nowicki", "Olsen", "Popescu", "Rossetti", "Stoica",
]
# (city, country, nationality adjective)
PLACES = [
    ("Tarnow", "Poland", "Polish"), ("Brno", "the Czech Republic", "Czech"), ("Kosice", "Slovakia", "Slovak"),
    ("Pecs", "Hungary", "Hungarian"), ("Cluj-Napoca", "Romania", "Romanian"), ("Plovdiv", "Bulgaria", "Bulgarian"),
    ("Izmir", "Turkey", "Turkish"), ("Patras", "Greece", "Greek"), ("Tampere", "Finland", "Finnish"),
    ("Uppsala", "Sweden", "Swedish"), ("Aarhus", "Denmark", "Danish"), ("Bergen", "Norway", "Norwegian"),
    ("Graz", "Austria", "Austrian"), ("Lyon", "France", "French"), ("Porto", "Portugal", "Portuguese"),
    ("Valencia", "Spain", "Spanish"), ("Bologna", "Italy", "Italian"), ("Ghent", "Belgium", "Belgian"),
    ("Utrecht", "the Netherlands", "Dutch"), ("Cork", "Ireland", "Irish"), ("Tartu", "Estonia", "Estonian"),
    ("Kaunas", "Lithuania", "Lithuanian"), ("Daugavpils", "Latvia", "Latvian"), ("Maribor", "Slovenia", "Slovenian"),
    ("Split", "Croatia", "Croatian"), ("Nis", "Serbia", "Serbian"), ("Lviv", "Ukraine", "Ukrainian"),
    ("Chisinau", "Moldova", "Moldovan"), ("Gyumri", "Armenia", "Armenian"), ("Kutaisi", "Georgia", "Georgian"),
    ("Basel", "Switzerland", "Swiss"), ("Leipzig", "Germany", "German"), ("Limassol", "Cyprus", "Cypriot"),
    ("Sliema", "Malta", "Maltese"), ("Esch-sur-Alzette", "Luxembourg", "Luxembourgish"), ("Akureyri", "Iceland", "Icelandic"),
]
OCCUPATIONS = [
    "lighthouse keeper", "organ builder", "beekeeper", "ferry mechanic", "court interpreter", "glassblower",
    "veterinary surgeon", "tram driver", "harbour pilot", "cartographer", "piano tuner", "sommelier",
    "forensic accountant", "saddle maker", "air traffic controller", "bookbinder", "stonemason",
    "marine biologist", "locksmith", "puppeteer", "tax inspector", "midwife", "crane operator",
    "radio presenter", "ceramicist", "museum conservator", "fishmonger", "mountain guide", "violin maker",
    "customs officer", "dental hygienist", "street photographer", "arborist", "clockmaker", "chess coach",
    "textile restorer", "seismologist", "falconer", "ice-hockey referee", "railway signaller",
    "orthopaedic nurse", "wine grower", "pharmacist", "geologist", "translator of Icelandic poetry",
]
HOBBIES = [
    "restores vintage motorcycles", "keeps racing pigeons", "sings in a Gregorian choir", "breeds Angora rabbits",
    "plays the hurdy-gurdy", "collects antique barometers", "competes in ice swimming", "builds ship models",
    "runs ultramarathons", "grows rare orchids", "practises archery on horseback", "paints icons",
    "brews mead", "restores church bells", "dances the tango competitively", "writes crossword puzzles",
    "collects meteorites", "trains sheepdogs", "plays water polo", "carves wooden spoons",
    "photographs lighthouses", "rows on the river every dawn", "keeps bees on a city roof", "forages mushrooms",
    "restores old typewriters", "plays the bandoneon", "sails a wooden dinghy", "knits Fair Isle jumpers",
    "repairs cuckoo clocks", "fences with a sabre",
]
# (event as the private record words it, the same event as the public press words it)
EVENTS = [
    ("was injured when scaffolding collapsed at the harbour", "was hurt when scaffolding fell at the port"),
    ("lost the tip of a finger in a printing press", "had a fingertip crushed by a printing machine"),
    ("was bitten by a neighbour's dog while jogging", "suffered a dog bite while out running"),
    ("was detained for forty hours after a football match", "was held by police for nearly two days after a match"),
    ("had a property confiscated for unpaid road tolls", "saw a house seized over unpaid motorway tolls"),
    ("was dismissed after reporting fraud at the workplace", "was fired for blowing the whistle on fraud"),
    ("was trapped in a lift for nine hours", "spent a night stuck in an elevator"),
    ("was struck by lightning on a hiking trail", "survived a lightning strike while hiking"),
    ("fell through the ice while fishing on a lake", "went through lake ice on a fishing trip"),
    ("was wrongly listed as deceased in the civil register", "was declared dead by mistake in official records"),
    ("had a passport withheld for six years", "was refused a passport for six years"),
    ("was poisoned by contaminated well water", "fell ill from tainted water from a well"),
    ("was evicted during a dispute over an inheritance", "was thrown out of a home in an inheritance row"),
    ("was attacked by a swan on a canal path", "was assaulted by a swan beside a canal"),
    ("was denied access to a child for eleven years", "could not see a child for over a decade"),
    ("was burned in a laboratory fire", "was injured in a fire at a laboratory"),
    ("was refused a licence to run a ferry service", "was denied a permit for a ferry business"),
    ("was involved in a collision with a snowplough", "crashed into a snowplough"),
    ("had telephone calls intercepted for two years", "was wiretapped for two years"),
    ("contracted hepatitis from a blood transfusion", "caught hepatitis through transfused blood"),
    ("was injured by a falling chandelier in a theatre", "was hit by a chandelier that fell in a theatre"),
    ("was sued over a satirical cartoon", "faced a lawsuit over a satirical drawing"),
    ("was held in pre-trial detention for three years", "spent three years in custody awaiting trial"),
    ("lost a farm to a landslide", "saw a farm swept away by a landslide"),
    ("was misdiagnosed with a rare tropical disease", "was wrongly told of a rare tropical illness"),
    ("had a pension cut after moving abroad", "lost part of a pension after emigrating"),
    ("was hit by a stray bullet at a wedding", "was wounded by a stray shot at a wedding party"),
    ("was prosecuted for feeding stray cats", "was taken to court for feeding street cats"),
    ("suffered hearing loss from military exercises nearby", "went partly deaf from nearby army drills"),
    ("was barred from a chess tournament", "was banned from a chess competition"),
]
ORG_KINDS = ["Shipping", "Textiles", "Glassworks", "Logistics", "Dairy", "Printing", "Engineering", "Foods",
             "Timber", "Pharmaceuticals", "Ceramics", "Brewery"]
ORG_SUFFIXES = ["Ltd", "S.A.", "GmbH", "and Sons", "Cooperative", "Group"]
HOSPITALS = ["St Brigid's Hospital", "the Regional Clinical Centre", "the University Hospital",
             "the Mercy Infirmary", "the Central Military Hospital", "St Lazarus Clinic"]
COURTS = ["the District Court", "the Regional Court", "the Court of Appeal", "the Administrative Court"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December"]


@dataclass(frozen=True)
class Person:
    id: str
    first: str
    last: str
    sex: str
    birth_year: int
    city: str
    country: str
    nationality: str
    occupation: str
    hobby: str
    employer: str
    event: tuple[str, str]
    event_date: tuple[int, int, int]  # day, month, year
    case_no: str
    lawyer: str
    style: str  # "court" or "medical"

    @property
    def name(self) -> str:
        return f"{self.first} {self.last}"

    @property
    def title(self) -> str:
        return "Ms" if self.sex == "F" else "Mr"

    @property
    def pronoun(self) -> str:
        return "she" if self.sex == "F" else "he"

    @property
    def possessive(self) -> str:
        return "her" if self.sex == "F" else "his"

    @property
    def objective(self) -> str:
        return "her" if self.sex == "F" else "him"

    def age_in(self, year: int) -> int:
        return year - self.birth_year


@dataclass
class DemoData:
    """The synthetic population: originals, background and two gold-span releases."""

    originals: Corpus
    background: Corpus
    releases: dict[str, Release]
    people: list[Person] = field(default_factory=list)


class _Builder:
    """Builds a text piece by piece, recording a gold span for each marked piece."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.length = 0
        self.spans: list[Span] = []

    def add(self, text: str) -> _Builder:
        self.parts.append(text)
        self.length += len(text)
        return self

    def ent(self, text: str, label: str, identifier_type: str, entity_id: str) -> _Builder:
        self.spans.append(Span(self.length, self.length + len(text), label, entity_id, identifier_type))
        return self.add(text)

    @property
    def text(self) -> str:
        return "".join(self.parts)


def _a(word: str) -> str:
    """The indefinite article for ``word``."""
    return "an" if word[:1].lower() in "aeiou" else "a"


def _a_number(n: int) -> str:
    """The article before a number read aloud: "an 18-year-old", "a 28-year-old"."""
    return "an" if n in (8, 11, 18) or 80 <= n <= 89 else "a"


def _date(d: tuple[int, int, int]) -> str:
    return f"{d[0]} {MONTHS[d[1] - 1]} {d[2]}"


def _make_people(rng: random.Random, n: int, used: set[str]) -> list[Person]:
    people = []
    while len(people) < n:
        sex = rng.choice("FM")
        first, last = rng.choice(FIRST_NAMES[sex]), rng.choice(SURNAMES)
        if f"{first} {last}" in used:
            continue
        used.add(f"{first} {last}")
        city, country, nationality = rng.choice(PLACES)
        employer = f"{rng.choice(SURNAMES)} {rng.choice(ORG_KINDS)} {rng.choice(ORG_SUFFIXES)}"
        year = rng.randint(1995, 2012)
        idx = len(used)
        people.append(Person(
            id=f"person-{idx:04d}", first=first, last=last, sex=sex, birth_year=rng.randint(1935, 1990),
            city=city, country=country, nationality=nationality, occupation=rng.choice(OCCUPATIONS),
            hobby=rng.choice(HOBBIES), employer=employer, event=rng.choice(EVENTS),
            event_date=(rng.randint(1, 28), rng.randint(1, 12), year),
            case_no=f"{rng.randint(10000, 79999)}/{str(year + rng.randint(0, 3))[-2:]}",
            lawyer=f"{rng.choice(FIRST_NAMES[rng.choice('FM')])} {rng.choice(SURNAMES)}",
            style=rng.choice(["court", "court", "medical"]),
        ))
    return people


def _original(p: Person, rng: random.Random, doc_id: str) -> Document:
    b = _Builder()
    e = p.id
    year = p.event_date[2]
    if p.style == "court":
        b.add("PROCEDURE\n\nThe case originated in an application (no. ").ent(p.case_no, "CODE", "DIRECT", f"{e}:case")
        b.add(") against ").ent(p.country, "LOC", "QUASI", f"{e}:country").add(f" lodged by {_a(p.nationality)} ")
        b.ent(p.nationality, "DEM", "QUASI", f"{e}:nat").add(" national, ").ent(f"{p.title} {p.name}", "PERSON", "DIRECT", f"{e}:name")
        b.add(' ("the applicant"). The applicant was represented by ').ent(p.lawyer, "PERSON", "QUASI", f"{e}:lawyer")
        b.add(", a lawyer practising in ").ent(p.city, "LOC", "QUASI", f"{e}:city").add(".\n\nTHE FACTS\n\n")
        b.add("The applicant was born in ").ent(str(p.birth_year), "DATETIME", "QUASI", f"{e}:born")
        b.add(" and lives in ").ent(p.city, "LOC", "QUASI", f"{e}:city").add(". ")
        b.add(f"{p.pronoun.capitalize()} works as {_a(p.occupation)} ").ent(p.occupation, "DEM", "QUASI", f"{e}:job").add(" for ").ent(p.employer, "ORG", "QUASI", f"{e}:org").add(". ")
        b.add("On ").ent(_date(p.event_date), "DATETIME", "QUASI", f"{e}:date").add(f" the applicant {p.event[0]}. ")
        b.add(f"In {rng.choice(['the following weeks', 'the months that followed', 'the aftermath'])} "
              f"{p.pronoun} brought proceedings before ").ent(rng.choice(COURTS), "ORG", "NO_MASK", f"{e}:court")
        b.add(", which dismissed the claim in ").ent(str(year + 1), "DATETIME", "QUASI", f"{e}:year2").add(". ")
        b.add(f"The applicant, who {p.hobby} in {p.possessive} spare time, "
              f"submitted that the authorities had failed to protect {p.objective}.\n")
    else:
        age = p.age_in(year)
        b.add("CLINICAL NOTE\n\nPatient ").ent(p.name, "PERSON", "DIRECT", f"{e}:name").add(f", {_a_number(age)} ")
        b.ent(f"{age}-year-old", "QUANTITY", "QUASI", f"{e}:age").add(" ").ent(p.nationality, "DEM", "QUASI", f"{e}:nat")
        b.add(" ").ent(p.occupation, "DEM", "QUASI", f"{e}:job").add(" from ").ent(p.city, "LOC", "QUASI", f"{e}:city").add(", was admitted to ")
        b.ent(rng.choice(HOSPITALS), "ORG", "QUASI", f"{e}:hospital").add(" on ").ent(_date(p.event_date), "DATETIME", "QUASI", f"{e}:date")
        b.add(f". The patient reports that {p.pronoun} {p.event[0]}. ")
        b.add("Medical record number ").ent(f"MRN-{p.case_no.replace('/', '')}", "CODE", "DIRECT", f"{e}:mrn").add(". ")
        b.add("Employer: ").ent(p.employer, "ORG", "QUASI", f"{e}:org").add(". ")
        b.add(f"Social history: {p.pronoun} {p.hobby}. Emergency contact: ").ent(p.lawyer, "PERSON", "QUASI", f"{e}:contact")
        b.add(". Follow-up planned for ").ent(f"{MONTHS[p.event_date[1] % 12]} {year}", "DATETIME", "QUASI", f"{e}:followup").add(".\n")
    return Document(id=doc_id, text=b.text, subject=p.id, spans=tuple(b.spans))


def _background_docs(p: Person, rng: random.Random, k: int) -> list[Document]:
    """``k`` public documents about ``p``, each repeating a random subset of attributes."""
    year = p.event_date[2]
    templates = [
        lambda: (f"{p.city.upper()} — {p.name}, {_a(p.occupation)} {p.occupation}, told reporters about the day "
                 f"{p.pronoun} {p.event[1]}. " + (f"The {p.nationality} {p.occupation} is now {p.age_in(year + 1)}. "
                 if rng.random() < 0.6 else "") + (f"{p.first} also {p.hobby}." if rng.random() < 0.5 else "")),
        lambda: (f"Register of complaints, {year + 2}: {p.last}, {p.first}; {p.nationality}; residence "
                 f"{p.city}" + (f"; employer {p.employer}" if rng.random() < 0.6 else "")
                 + f". Summary: the complainant {p.event[1]} in {MONTHS[p.event_date[1] - 1]} {year}."),
        lambda: (f"Profile. {p.first} {p.last} " + rng.choice(["grew up", "was raised", "spent a childhood"])
                 + f" in {p.country} and trained as {_a(p.occupation)} {p.occupation}. "
                 + (f"Friends say {p.pronoun} {p.hobby}. " if rng.random() < 0.7 else "")
                 + (f"{p.pronoun.capitalize()} now lives in {p.city}." if rng.random() < 0.5 else "")),
        lambda: (f"Court listing: {p.title} {p.last} v. {p.country}, concerning how the applicant "
                 f"{p.event[1]}. " + (f"Counsel: {p.lawyer}." if rng.random() < 0.5 else "")),
        lambda: (f"An obituary of a colleague mentions {p.name}, " + rng.choice(["a long-time", "a respected", "a well-known"])
                 + f" {p.occupation} at {p.employer}" + (f" in {p.city}" if rng.random() < 0.5 else "") + "."),
    ]
    order = rng.sample(range(len(templates)), k=min(k, len(templates)))
    return [Document(id=f"bg-{p.id[7:]}-{j + 1}", text=templates[t]().strip(), subject=p.id)
            for j, t in enumerate(order)]


#: People the generator can make with distinct names: half of the first-name x surname pairs, so
#: drawing distinct ones stays quick.
MAX_PEOPLE = len(SURNAMES) * sum(len(v) for v in FIRST_NAMES.values()) // 2
#: The largest release: ``n`` people plus the ``n // 2`` who appear only in the background.
MAX_RELEASED = max(n for n in range(1, MAX_PEOPLE + 1) if n + n // 2 <= MAX_PEOPLE)


def generate(n: int = 40, seed: int = 0, *, background_per_person: int = 3, extra_people: int | None = None) -> DemoData:
    """Generate a population of ``n`` people in the release and ``extra_people``
    (default ``n // 2``) more who appear only in the background (at most :data:`MAX_PEOPLE` in
    all, so ``n`` is at most :data:`MAX_RELEASED` with the default)."""
    if n < 1:
        raise ValueError("n must be at least 1")
    extra = n // 2 if extra_people is None else extra_people
    if n + extra > MAX_PEOPLE:
        raise ValueError(f"at most {MAX_PEOPLE} people can be generated (n = {n} and {extra} in the background "
                         "only were asked for)")
    rng = random.Random(seed)
    people = _make_people(rng, n + extra, set())
    released, only_public = people[:n], people[n:]
    originals = Corpus([_original(p, rng, f"doc-{i + 1:04d}") for i, p in enumerate(released)],
                       name="originals")
    bg: list[Document] = []
    for p in people:
        bg.extend(_background_docs(p, rng, background_per_person))
    rng.shuffle(bg)
    background = Corpus(bg, name="background")
    # Gold masking decisions: every DIRECT and QUASI identifier; NO_MASK mentions stay.
    masked = {d.id: [s for s in d.spans if s.identifier_type != "NO_MASK"] for d in originals}
    releases = {
        "suppressed": sanitize_corpus(originals, masked, name="suppressed", sanitizer="suppression"),
        "labels": sanitize_corpus(
            originals,
            {i: [replace(s, replacement=f"[{s.label}]") for s in spans] for i, spans in masked.items()},
            name="labels", sanitizer="labels"),
    }
    del only_public  # present in the background only
    return DemoData(originals=originals, background=background, releases=releases, people=people)


#: Generalisations of the quasi-identifiers by the ``entity_id`` suffix of their gold span (a
#: truthful, coarser replacement), for the ``generalized`` release of the development population.
def _generalised(p: Person, kind: str, label: str) -> str:
    decade = p.birth_year // 10 * 10
    return {"country": "a European country", "nat": "European", "city": f"a city in {p.country}",
            "born": f"the {decade}s", "date": str(p.event_date[2]), "year2": "a later year",
            "followup": "a later month", "job": "skilled worker", "org": "a private company",
            "hospital": "a hospital", "age": "middle-aged", "name": f"[{label}]", "lawyer": "[PERSON]",
            "contact": "[PERSON]", "case": "[CODE]", "mrn": "[CODE]"}.get(kind, f"[{label}]")


def development_population(n: int = 40, seed: int = 0, *, background_per_person: int = 3,
                           extra_people: int | None = None) -> DemoData:
    """A population where masking matters, for developing re-identification attacks (TRIR).

    The records and the background of :func:`generate` (the background repeats the records'
    quasi-identifiers in other words), with four releases: ``suppressed`` and ``labels`` (gold
    spans removed, or replaced by ``[LABEL]``), ``generalized`` (names and codes labelled,
    quasi-identifiers replaced by truthful coarser terms: a city by its country, a date by its
    year) and ``dev``: a second, differently worded record of each person masked with labels,
    for choosing an attacker's epoch without touching a release under test. An NER-masked
    release comes from running a sanitizer (e.g. ``spacy_ner``) on the originals."""
    data = generate(n, seed, background_per_person=background_per_person, extra_people=extra_people)
    people = {p.id: p for p in data.people}
    masked = {d.id: [s for s in d.spans if s.identifier_type != "NO_MASK"] for d in data.originals}
    data.releases["generalized"] = sanitize_corpus(
        data.originals,
        {i: [replace(s, replacement=_generalised(people[data.originals[i].subject], (s.entity_id or ":").split(":")[-1],
                                                 s.label)) for s in spans] for i, spans in masked.items()},
        name="generalized", sanitizer="generalization")
    rng = random.Random(seed + 7919)  # another wording of each record: the dev release
    second = []
    for d in data.originals:
        p = people[d.subject]
        other = replace(p, style="medical" if p.style == "court" else "court")
        second.append(_original(other, rng, f"dev-{d.id[4:]}"))
    dev_orig = Corpus(second, name="dev-originals")
    dev_masked = {d.id: [replace(s, replacement=f"[{s.label}]") for s in d.spans if s.identifier_type != "NO_MASK"]
                  for d in dev_orig}
    data.releases["dev"] = sanitize_corpus(dev_orig, dev_masked, name="dev", sanitizer="labels")
    return data


#: The files :func:`write` makes under its folder.
FILES = ("originals.jsonl", "background.jsonl", "releases/suppressed.jsonl", "releases/labels.jsonl")


def write(out_dir: str | Path, n: int = 40, seed: int = 0) -> DemoData:
    """Write the population as JSONL files under ``out_dir`` and return it."""
    from audit.io.loaders import save_jsonl

    out = Path(out_dir)
    data = generate(n=n, seed=seed)
    save_jsonl(data.originals, out / "originals.jsonl")
    save_jsonl(data.background, out / "background.jsonl")
    for name, release in data.releases.items():
        save_jsonl(release.corpus, out / "releases" / f"{name}.jsonl")
    return data
