r"""The offline fact extractor's vocabulary: the English words and phrases it knows (jobs,
relatives, pets, health conditions, fillers, words that are not names) and the regular
expressions, pure data, that the rules in synopsis/extraction_rules.py are built from.

Every pattern here sees what users type, so each runs in time linear in its text (the
guard is tests/test_text_linear.py). Two habits keep them so. A pattern that starts with
whitespace (``\s*``, ``\s+``) is tried only where a whitespace run starts (``(?<!\s)``):
tried inside a run of n spaces it would rescan the run's rest from each of them (n²,
and n³ with two quantifiers over the same spaces). And a quantifier followed by what it
cannot match is possessive (``\s*+,``): nothing to give back, so nothing to retry."""

from __future__ import annotations

import calendar
import re

# --- dates, names, places, work -------------------------------------------------------

MONTHS = {name.lower(): n for n, name in enumerate(calendar.month_name) if name}
MONTH = "(?i:" + "|".join(calendar.month_name[1:]) + ")"
DAYS_MONTHS = "|".join([*calendar.day_name, *calendar.month_name[1:]])
NAME = r"[A-ZÀ-Þ][a-zß-ÿ]+(?:-[A-ZÀ-Þ][a-zß-ÿ]+|'[A-ZÀ-Þ][a-zß-ÿ]+)?"
_CAP = rf"(?!(?:I|{DAYS_MONTHS})\b)[A-ZÀ-Þ][\w'&.\-]*"
_JOIN = r"\s+|\s*,\s*|\s+(?:de|da|do|dos|das|del|di|la|le|du|upon|am|of|&)\s+"
PLACE = rf"(?:the\s+)?{_CAP}(?:(?:{_JOIN}){_CAP})*"
ORG_NOUN = (
    r"bank|hospital|school|university|college|startup|start-up|company|firm|restaurant|shop"
    r"|store|cafe|café|bakery|hotel|factory|lab|library|museum|clinic|pharmacy|supermarket"
    r"|agency|nonprofit|charity|consultancy|newspaper|warehouse|airline|airport|gym|bar|farm"
    r"|studio|office|daycare|nursery|garage|bookshop|bookstore|law firm|tech company"
)
ORG = (
    rf"{PLACE}(?:\s+(?:{ORG_NOUN}))?"
    rf"|(?:a|an|the)\s+(?:[a-z][\w\-]*\s+){{0,2}}?(?:{ORG_NOUN})"
)
JOBS = (
    r"engineer|developer|programmer|designer|teacher|professor|lecturer|nurse|doctor|physician"
    r"|surgeon|dentist|pharmacist|lawyer|attorney|accountant|architect|chef|cook|baker|waiter"
    r"|waitress|bartender|barista|cashier|driver|pilot|mechanic|electrician|plumber|carpenter"
    r"|farmer|scientist|researcher|analyst|consultant|manager|director|writer|author"
    r"|journalist|editor|photographer|artist|musician|actor|actress|student|intern|librarian"
    r"|firefighter|police officer|paramedic|therapist|psychologist|psychiatrist|veterinarian"
    r"|vet|salesperson|realtor|banker|economist|translator|tutor|coach|trainer|freelancer"
    r"|entrepreneur|founder|cleaner|nanny|secretary|receptionist|administrator|clerk"
    r"|technician|mathematician|physicist|chemist|biologist|midwife|caregiver|social worker"
)
DEPARTMENTS = ("HR", "IT", "Sales", "Marketing", "Support", "Engineering", "Finance")

# --- people, pets, health -------------------------------------------------------------

RELATIONS = (
    r"best\s+friend|friend|sister|brother|wife|husband|son|daughter|mom|mum|mother|dad"
    r"|father|partner|boyfriend|girlfriend|fianc[ée]e?|grandma|grandmother|granny|grandpa"
    r"|grandfather|aunt|uncle|cousin|niece|nephew|kid|child|boss|roommate|flatmate"
    r"|colleague|coworker|spouse"
)
RELATION_NAMES = {
    "mom": "mother",
    "mum": "mother",
    "dad": "father",
    "grandma": "grandmother",
    "granny": "grandmother",
    "grandpa": "grandfather",
    "kid": "child",
    "fiancé": "fiance",
    "fiancée": "fiancee",
    "coworker": "colleague",
    "flatmate": "roommate",
}
PETS = (
    r"dog|cat|puppy|kitten|parrot|rabbit|bunny|hamster|horse|bird|turtle|tortoise|snake"
    r"|guinea\s+pig"
)
CONDITIONS = (
    r"asthma|(?:type\s+[12]\s+)?diabetes|celiac(?:\s+disease)?|coeliac(?:\s+disease)?|epilepsy"
    r"|migraines|ADHD|arthritis|high\s+blood\s+pressure|hypertension|IBS|crohn's(?:\s+disease)?"
    r"|eczema|psoriasis|a\s+heart\s+condition|anemia|lupus|multiple\s+sclerosis|gout"
)
CONDITION_NAMES = {
    "diabetic": "diabetes",
    "celiac": "celiac disease",
    "coeliac": "celiac disease",
    "asthmatic": "asthma",
    "epileptic": "epilepsy",
}


# --- common words: not names, fillers -------------------------------------------------


def _words(text: str) -> set[str]:
    return set(text.split())


NOT_NAMES = _words(
    """sorry fine good great okay ok here back done new not so just also really very still home
    ready sure happy glad tired sick busy free available in out on off up down there all afraid
    excited interested married single allergic vegetarian vegan retired pregnant the a an your
    no yes well only always never now from at with about like hungry cold hot late early bored
    lost confused curious old young human male female gay straight christian catholic muslim
    jewish hindu buddhist atheist american british english scottish welsh irish canadian
    mexican brazilian argentinian argentine chilean colombian peruvian cuban spanish portuguese
    french german italian dutch belgian swiss austrian swedish norwegian danish finnish polish
    czech slovak hungarian romanian bulgarian greek turkish russian ukrainian serbian croatian
    albanian chinese japanese korean vietnamese thai filipino indonesian malaysian indian
    pakistani iranian iraqi israeli palestinian lebanese syrian saudi egyptian moroccan nigerian
    ghanaian kenyan ethiopian australian european asian african latino latina hispanic arab
    persian jamaican haitian taiwanese later tomorrow today tonight maybe anytime and or but
    if so to is was who which that this he she it we they irrelevant unimportant secret
    private"""
) | {word.lower() for word in DAYS_MONTHS.split("|")}
# a clause is mined only if what precedes the statement is made of these words
FILLERS = _words(
    """also and but so well oh yeah yes yep no ok okay actually honestly anyway anyways btw
    fyi hi hey hello now currently still plus then just basically by the way as you know for
    context lol haha sure right great thanks thank too again um uh last this next year years
    month months week weeks spring summer autumn fall winter ago recently lately in since on a
    few couple of days day today yesterday back"""
) | set(MONTHS)

# --- the sentence: hedges, clause breaks, what is not asserted ------------------------

# a sentence ends at whitespace after . ! ? or …, or at a line break with the whitespace
# around it (tried where a run starts: "\s*\n" from inside a run of n spaces rescans it)
SENTENCE_BREAK = re.compile(r"(?<=[.!?…])\s+|(?<!\s)\s*\n+\s*")
# every rule starts from one of these words: a sentence without any is not read further
FIRST_PERSON = re.compile(r"(?i)\b(?:i|me|my|we)\b")
ABBREVIATION = re.compile(r"\b(?:Mr|Mrs|Ms|Dr|St|Mt|Jr|Sr|vs|etc)\.$")  # "Dr." ends no sentence

HEDGE = re.compile(
    r"(?i)\b(?:i\s+(?:think|guess|believe|suppose|reckon)|probably|maybe|perhaps"
    r"|(?:i'm\s+)?pretty\s+sure|i\s+feel\s+like)\b"
)
# the statement ends where another begins (the clause is split there first). A break
# starts where a whitespace run starts, or at its punctuation (right after the previous
# break, whose trailing spaces it took); ", but" is "\s*+,\s++" or "\s++", never both
# ways (the old "\s*,?\s+but" split a run of n spaces n² ways at each of n places)
CLAUSE_BREAK = re.compile(
    r"(?:(?<!\s)|(?=[;:,]))(?:\s*+[;:]\s+|\s++[-\u2013\u2014]++\s+|(?:\s*+,\s++|\s++)but\s+"
    r"|(?:\s*+,\s++|\s++)(?:and|although|though|whereas|while|so|because|plus|also)\s++"
    r"(?=(?:[Ii]|[Mm]y|[Ww]e)\b)"
    r"|\s*+,\s*+(?=(?:[Ii]|[Mm]y|[Ww]e|(?:you\s++can\s++|just\s++|please\s++)?call\s++me)\b))"
)
# what follows these is not a statement of the user's: a hypothetical, or what someone
# else said ("my sister Ana says ..." keeps "my sister Ana")
# (read for where it first matches: a whitespace run is tried at its start, and for
# "said" also at its second space, as it always was: "I said" is the user's own, "I  said"
# with two spaces is cut at the second)
NOT_ASSERTED = re.compile(
    r"(?<!\s)\s*+\b(?:(?:even\s+|what\s+)?if|unless|suppose|supposing|imagine|assuming|whether"
    r"|in\s+case)\b"
    r"|(?:(?<!\s)(?<!\b[Ii])(?<!\b[Ww]e)(?<!'ve)|(?<=\s)(?<!\s\s))\s++(?:always\s+|once\s+|just\s+)?"
    r"(?:said|says|told|tells|asked|asks|claims|claimed|thinks|thought|believes|mentioned)\b"
    r"|(?<!\s)\s*+\baccording\s+to\b"
)
QUESTION = re.compile(
    r"(?i)^\W*(?:do|does|did|are|is|can|could|would|should|will|what|where|who|why|how|when"
    r"|which|have|has|shall|may)\b"
)
# where a quotation may open (synopsis/extraction_offline.py blanks each up to its close:
# a find per quote, not a pattern, which would rescan the text from every unclosed one)
QUOTE_OPENING = re.compile('["\u201c]')
QUOTE_CLOSING = {'"': '"', "\u201c": "\u201d"}

# --- the object of a statement: where it ends, what it is not -------------------------

# (read for where they first match, so they start where a whitespace run starts)
OBJECT_END = re.compile(
    r"(?<!\s)(?:\s++(?:because|since|when|whenever|while|as\s+long\s+as|so\s+that|but|which"
    r"|who|although|though|except|unless|if|and\s+(?:[Ii]|my|we|it|that|they|he|she))\b"
    r"|\s*+[;:(!?\u2013\u2014]|\s++-\s+)|\.(?:\s|$)"
)
COMMA = re.compile(r"(?<!\s)\s*+,(?!\d|\s*+\d{4}\b)")  # not in "$10,000" or "June 12, 2027"
# "cats, dogs, and pollen": items of 1-40 characters split by commas, the last after
# "and"/"or". Was "^[^,]{1,40}(?:,\s*[^,]{1,40})*,?\s+(?:and|or)\s+[^,]{1,40}$", which
# matches the same texts but let "\s*" and the item share each item's leading spaces
# (2^items tries on a list that fails). Now each comma-separated item is taken whole,
# one way (its leading spaces, then 1-40 characters, or spaces only); the last item is
# "and ..." itself, or an item whose "and ..." follows within its first 40 characters,
# or (the old "\s*" giving all but one space to the item) spaces then "and ..."; no
# comma: an item of 1-40 characters ending at a whitespace run before "and ...".
_LIST_END = r"(?:and|or)\s+[^,]{1,40}$"
LIST = re.compile(
    rf"^(?:(?:[^,]{{1,40}}(?<!\s)|\s(?=\s))\s++{_LIST_END}"
    r"|[^,]{1,40}(?:,(?:\s*+[^,\s][^,]{0,39}|\s++)(?=,))*+,"
    rf"(?:\s*+[^,]{{1,40}}(?<!\s)\s++|\s\s++|\s++){_LIST_END})"
)
TRAILING = re.compile(
    r"(?i)(?<!\s)\s++(?:a\s+lot|so\s+much|very\s+much|too|as\s+well|though|lol|haha|btw"
    r"|by\s+the\s+way|anyway|really|actually|honestly)$"
)
TRAILING_TIME = re.compile(
    r"(?i)(?<!\s)\s++(?:(?:last|this|next)\s+(?:spring|summer|autumn|fall|winter|year|month|week)"
    r"|(?:in|since|back\s+in|around)\s+(?:(?:\w+\s+)?\d{4}|" + MONTH + r")"
    r"|(?:a|one|two|three|a\s+few|a\s+couple\s+of|\d+)\s+(?:days?|weeks?|months?|years?)\s+ago"
    r"|recently|lately|these\s+days|nowadays|right\s+now|now|yesterday|today|a\s+while\s+ago)$"
)
REFERENTS = _words(
    """it it's its that this these those them him her you your yours his their our what how
    when where which who whom so too very one some any both all nothing none anything
    everything something everyone anyone"""
)
REFERENT_PAIRS = {"the idea", "the way", "the fact", "the thought", "a lot", "the one"}

# --- the pieces of the rules: who speaks, adverbs, verbs and what they take -----------

I_ = r"\b[Ii]"
IM = r"\b[Ii](?:'m|\s+am)"
WE = r"\b(?:[Ii]|[Ww]e)"
AUX = r"(?P<aux>'m|'re|\s+am|\s+are|'ve|\s+have)?"
ADV = (
    r"(?:\s+(?:really|also|just|still|currently|now|actually|recently|finally|absolutely"
    r"|totally|truly|definitely|honestly|mostly|usually|genuinely|seriously|probably|always"
    r"|originally|kind\s+of|sort\s+of))*"
)
REST = r"\s+(?P<what>.+)$"

LIKES = {
    "love": "loves",
    "like": "likes",
    "enjoy": "enjoys",
    "adore": "adores",
    "hate": "hates",
    "detest": "hates",
    "loathe": "hates",
    "dislike": "dislikes",
    "don't like": "dislikes",
    "do not like": "dislikes",
    "can't stand": "can't stand",
    "cannot stand": "can't stand",
    "into": "likes",
    "fan of": "likes",
}
NOT_LIKES = re.compile(r"(?i)to\s+(?:know|think|ask|say|see|hear|check|help|talk)\b")
NOT_GOALS = re.compile(
    r"(?i)^(?:know|ask|say|tell|see|check|make\s+sure|understand|hear|talk|thank|try\s+(?:it|this|that)"
    r"|think|go\s+to\s+bed|sleep|grab|take\s+a\s+break|share|mention|add|clarify|be\s+honest"
    r"|confirm|order|start\s+with|begin|continue|stop|cancel|change|update|remind|note|let|give"
    r"|show|look|do\s+(?:it|this|that)|get\s+(?:it|this|that)|eat)\b"
    r"|\b(?:tonight|today|now|later|tomorrow|this\s+(?:morning|afternoon|evening)|soon|first"
    r"|in\s+a\s+(?:minute|bit|sec(?:ond)?))\b"
)
GOAL_VERBS = {
    "want": "wants to",
    "wanna": "wants to",
    "plan": "plans to",
    "planning": "plans to",
    "hope": "hopes to",
    "hoping": "hopes to",
    "going": "is going to",
    "trying": "is trying to",
    "intend": "intends to",
    "aim": "aims to",
    "aiming": "aims to",
}
