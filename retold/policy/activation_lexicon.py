"""The English the activation policy reads: cue phrases for each category and each form.

Why a module of its own: the rules (:mod:`retold.policy.activation`) stay short and
reviewable while these lists grow (a new diet word, a tool name, a one-off phrase). Every
entry is generic English, never a sentence from a labelled set; the rules report the entry
that matched as a cue, so these lists are also the whole vocabulary a decision's reason can
contain besides its fixed wording.

Entries are phrases of one or more words. They are matched on Snowball stems
(:func:`retold.ingest.equivalence.claim_lexicon.stem_word`), so "replies", "replying" and
"reply" are one entry; hyphenated and slashed tokens ("red-eye", "she/her") match whole, and a
single-word entry also matches one part of a compound ("gluten" in "gluten-free"). An entry
written ``=word`` matches that word exactly, where its stem would be another word's ("mostly"
and "most").
"""

from __future__ import annotations

from retold.ingest.equivalence.claim_lexicon import HEDGES as _JUDGE_HEDGES
from retold.ingest.equivalence.claim_lexicon import RELATIONS as _RELATION_STEMS
from retold.ingest.equivalence.claim_lexicon import TOOLS as _TOOLS


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


def _phrases(text: str) -> tuple[str, ...]:
    """Comma-separated phrases: keeps the long lists below readable."""
    return tuple(p.strip() for p in text.split(",") if p.strip())


# --------------------------------------------------------------------------- categories

IDENTITY_NAME = _phrases(
    "my name, name is, preferred name, first name, last name, surname, nickname, pronoun, "
    "she/her, he/him, they/them, she/they, he/they"
)
"""Name and pronoun phrases: the strongest identity cue, and a standing form in themselves."""
NAME_VERBS = _phrases("call me, go by, goes by, going by, known as")
"""Followed by a capitalised word ("call me Bea"), a name; otherwise how to address the user."""

RELATIONSHIP = _phrases(
    "married, engaged, divorced, widowed, fiance, fiancee, boyfriend, girlfriend, "
    "best friend, report to, reports to, wedding, anniversary"
)
PEOPLE_WORDS = _words(
    "wife husband partner spouse girlfriend boyfriend mom mother dad father parent parents son "
    "daughter kid kids child children baby brother sister sibling friend friends boss manager "
    "colleague colleagues coworker coworkers cousin aunt uncle grandma grandpa grandmother "
    "grandfather niece nephew roommate flatmate neighbor neighbour dog cat pet mentor team "
    "teammate client clients customer customers family staff landlord doctor therapist dentist "
    "coach assistant student students company employer in-laws"
)
PEOPLE = frozenset(PEOPLE_WORDS) | (_RELATION_STEMS - {"lead"})
"""Nouns naming other people (the judge's relation stems, less the verb-like "lead", and more)."""
PERSON_SUBJECTS = frozenset(
    _words("he she they him them his her their everyone everybody nobody people someone somebody")
)
SPEAKER = frozenset(_words("i me my mine myself we us our ours ourselves"))

CONSTRAINTS = _phrases(
    "vegetarian, vegan, pescatarian, allergic, allergy, allergies, gluten, celiac, coeliac, "
    "lactose, intolerant, dairy, peanut, peanuts, tree nuts, shellfish, halal, kosher, pork, "
    "alcohol, sober, caffeine, diabetic, diabetes, diet, low-carb, low-sodium, keto, fasting, "
    "screen reader, blind, low vision, visually impaired, colorblind, colourblind, deaf, "
    "hard of hearing, captions, dyslexia, dyslexic, wheelchair, large font, large fonts, "
    "large text, high contrast, accessibility, accessible, migraine, "
    "aisle, window seat, red-eye, layover, layovers, personal details, personal information, "
    "personal data, privacy, magnifier, screen magnifier, shabbat, sabbath"
)
"""Diet, health, accessibility and travel limits: specific enough to beat a taste word."""
SCHEDULE = _phrases(
    "schedule, working hours, work hours, office hours, lunch hour, unavailable, do not disturb, "
    "quiet hours, out of office, days a week, part-time, full-time, four-day week"
)
"""Availability limits (constraints), weaker than a hobby word."""
SCHEDULE_CONTEXT = frozenset(
    _words("meeting meetings call calls book contact message ping reach disturb available appointments")
)
SCHEDULE_TIMES = frozenset(
    _words(
        "weekends weekend evenings evening mornings morning nights night weekdays before after noon "
        "midnight lunch mondays tuesdays wednesdays thursdays fridays saturdays sundays"
    )
)
"""A scheduling word with a time word ("don't message me on weekends") is an availability limit;
either alone is not ("I bake every weekend")."""
DIET_FOODS = frozenset(
    _words(
        "beef chicken fish seafood eggs egg pork meat dairy sugar soy lamb mushrooms onions garlic "
        "coffee tea soda"
    )
)
NEGATORS = frozenset(_words("not never no avoid without free skip cannot"))
"""A food with one of these ("I never eat beef", "no pork") is a diet limit; alone it is a taste."""
COMMUNICATION = _phrases(
    "answer, answers, reply, replies, respond, response, responses, explanation, explanations, "
    "summary, summaries, tone, formal, formally, casual, casually, informal, polite, emoji, "
    "emojis, bullet, bullet points, paragraph, paragraphs, markdown, headings, wall of text, "
    "walls of text, concise, terse, verbose, succinct, wordy, jargon, plain language, "
    "plain english, simple terms, metric, imperial, celsius, fahrenheit, units, kilometres, "
    "kilometers, miles, grams, kilograms, millilitres, milliliters, litres, liters, ounces, "
    "cups, inches, centimetres, centimeters, 24-hour, 12-hour, am/pm, date format, dates, "
    "spelling, oxford comma, clarifying questions, follow-up questions, one question at a time, "
    "british english, american english, active voice, passive voice, apologise, apologize, "
    "apologies, disclaimers, caveats, cite, citations, email, phone call, phone calls, "
    "text me, message me, voicemail, call me, address me, addressed, talk to me, speak to me, "
    "write to me, sign-off, greeting, small talk, chit-chat, pleasantries, exclamation marks, "
    "exclamation points, punctuation, tldr, sugarcoat, blunt, bluntly, straightforward"
)
IDENTITY = _phrases(
    "live in, lives in, living in, based in, based out of, am from, is from, time zone, timezone, "
    "cet, cest, utc, gmt, bst, est, edt, pst, pdt, cst, mst, ist, jst, aest, work as, works as, job, "
    "occupation, profession, speak, speaks, fluent, fluently, native, first language, "
    "mother tongue, bilingual, left-handed, right-handed, years old, born, nationality, citizen, "
    "phd, for a living, second language, native speaker, healthcare, finance, fintech, banking, "
    "education, academia, retail, logistics, insurance, hospitality, construction, government, "
    "nonprofit, consulting"
)
ROLES = frozenset(
    _words(
        "engineer developer programmer designer teacher professor lecturer nurse doctor physician "
        "surgeon dentist pharmacist lawyer attorney paralegal accountant architect consultant "
        "analyst scientist researcher student founder ceo cto freelancer contractor journalist "
        "translator librarian chef electrician plumber therapist paramedic firefighter pilot "
        "veterinarian recruiter manager illustrator writer editor photographer artist musician "
        "intern"
    )
)
"""Occupations, matched as written (singular): stems would fold "developer" onto "development"."""
TIME_REGIONS = frozenset(
    _words("eastern pacific central mountain european atlantic greenwich coordinated india japan")
)
"""``<region> time`` ("Central European Time") is a time-zone cue."""
WORKFLOW = tuple(sorted(_TOOLS)) + _phrases(
    "git, github, gitlab, jira, linear, notion, obsidian, todoist, trello, asana, slack, docker, "
    "kubernetes, terraform, figma, excel, google docs, latex, overleaf, jupyter, react, django, "
    "flask, fastapi, rails, node, deno, sql, uv, homebrew, tmux, rust, java, mac, macbook, "
    "windows, iphone, android, ios, code, coding, commit, commits, conventional commits, branch, "
    "pull request, pull requests, squash-merge, rebase, rebasing, merge commits, tests, "
    "test-driven, tdd, unit tests, type hints, docstring, docstrings, linter, formatter, "
    "indentation, tabs, snake_case, camelcase, semicolons, variables, functions, repo, repos, "
    "repository, deploy, deploys, frontend, backend, ide, editor, terminal, keyboard shortcuts, "
    "dark mode, light mode, theme, notes, tasks, to-do, calendar, inbox, spreadsheet, drafts, "
    "draft, deep work, morning person, night owl, remote, remotely, async, standup, pomodoro, "
    "night shift, night shifts, shift work, shifts, meetings, trunk-based, gitflow, code review, "
    "code reviews, pair programming, standing desk, dependencies, package manager, keyboard, "
    "keyboards, yaml, json, toml, config files, first person, papers, elixir, ruby, dart, julia, "
    "zig, time blocking"
)
AFFECT = _phrases(
    "love, loves, enjoy, enjoys, adore, fan, favorite, favourite, hobby, hobbies, passion, "
    "passionate, keen on, interested in, like, likes"
)
"""Taste words: with only tool cues beside them the claim is an interest, not a working default."""
INTERESTS = _phrases(
    "hiking, hike, climbing, bouldering, cycling, chess, guitar, piano, cello, violin, drums, "
    "painting, photography, gardening, knitting, baking, bake, sourdough, cooking, novels, "
    "fiction, sci-fi, movies, films, music, jazz, podcasts, board games, gaming, video games, "
    "soccer, football, basketball, tennis, golf, yoga, formula 1, race, surfing, skiing, "
    "swimming, camping, anime, birdwatching, museums, concerts, theater, theatre"
)

# --------------------------------------------------------------------------- forms

STANDING_MARKERS = _phrases(
    "always, never, from now on, going forward, by default, in general, as a rule, every time, "
    "ever, in future, in the future, at all times, no matter what"
)
"""Explicit standing defaults: these make even an imperative ("always reply in Dutch") standing."""
WEAK_STANDING = _phrases(
    "every answer, every reply, every response, every message, every email, all answers, "
    "all replies, all responses, all my, every project, in every, for good, no more, "
    "for everything, everything you, my preference, my default, my rule"
)
"""Scope words that mark a default in a statement but never turn a task into one."""
STANDING_VERBS = _phrases(
    "prefer, use, like, love, hate, dislike, avoid, keep, speak, live, work, eat, drink, write, "
    "run, track, do, have, need, draft, add, code, take, wear, follow, read"
)
"""Verbs reported as the cue of a present-tense statement (any other present verb reads "statement")."""

ONE_OFF = _phrases(
    "this time, this once, this one, for now, right now, at the moment, today, tonight, "
    "tomorrow, this morning, this afternoon, this evening, here, above, below, the last, "
    "the previous, the following, just this, for this, in this"
)
DEMONSTRATIVES = frozenset(_words("this that these those"))
TIME_BOUND = _phrases(
    "until, till, til, for the next, for the coming, for the duration, for a while, "
    "for the time being, temporarily, this week, this month, this year, this weekend, "
    "this semester, this quarter, this summer, this winter, this spring, this autumn, this fall, "
    "this season, this sprint, this trip, next week, next month, next year, next weekend, "
    "next semester, next quarter, next summer, out of office, on vacation, on holiday, while i am, "
    "while we are, during"
)
DURATION_UNITS = frozenset(_words("day days week weeks month months year years"))
DURATION_COUNTS = frozenset(
    _words("a an one two three four five six seven eight nine ten twelve few couple several")
)
RECURRING = frozenset(
    _words(
        "lunch hour hours weekends mornings evenings nights workdays weekdays meals dinner "
        "breakfast meetings calls work working office business sleep"
    )
)
"""After "during", these name a recurring time ("during lunch"), not a bounded period."""
CONDITIONAL = _phrases(
    "if, when, whenever, unless, in case, as long as, provided that, depending on, except when, "
    "only when, only if, on days when"
)
DOMAIN_VERBS = frozenset(
    _words("talk write reply respond answer speak message email text chat fly travel explain")
)
DOMAIN_OBJECTS = frozenset(_words("things anything something stuff it"))
"""A closing "when you talk to me" / "when I fly" names the whole domain, not a condition."""
PAST = _phrases(
    "used to, back in the day, previously, formerly, ago, last week, last month, last year, "
    "last night, last time, last summer, yesterday, in college, in high school, at university, "
    "as a kid, as a child, when i was, grad school, no longer, anymore, any more, this past"
)
LAST_UNITS = frozenset(
    _words(
        "week month year night time summer winter spring fall autumn quarter semester weekend season "
        "decade term"
    )
)
"""``last <unit>`` ("last quarter") dates a claim in the past."""
PAST_ANYWHERE = frozenset(
    _words("was were did went got came took ran ate drank wrote spoke met told said bought tried")
)
"""Past forms read as past wherever they stand (unless after have/be: "have got")."""
PAST_AFTER_SUBJECT = frozenset(
    _words(
        "had made kept left felt found lost won thought knew began became chose built sold flew grew "
        "spent sent paid"
    )
)
"""Past forms that are also participles or other words: past only right after the subject."""
HEDGED = tuple(sorted(_JUDGE_HEDGES - {"if", "whether"})) + _phrases(
    "not sure, i think, i guess, i suppose, i believe, kind of, sort of, thinking about, "
    "thinking of, wish, hope, tend to, usually, =mostly, often, sometimes, occasionally, "
    "most of the time, these days, for the most part, try to, trying to, seems, ideally, "
    "would be better, would be nice, would be great, would be good, would be helpful, would help, "
    "i will, we will, going to, plan to, planning to, want to, would like to, "
    "someday, some day, eventually, do not mind, do not care, either is fine, either way, "
    "no preference, does not matter, whatever works"
)

QUESTION_OPENERS = frozenset(_words("how what why where which who whats"))
AUX_OPENERS = frozenset(_words("can could would will should do does did is are am shall may"))
ASKING = _phrases("can you, could you, would you, will you")
REQUEST_PHRASES = _phrases(
    "i want you to, i need you to, i would like you to, let us, let me know, "
    "i would prefer a, i would prefer an, i would prefer the, i would rather, "
    "i want a, i want an, i want the, i need a, i need an, i need the, "
    "i would like a, i would like an, i would like the, i would like some"
)

DISCOURSE = frozenset(
    _words(
        "actually also oh ok okay so well btw fyi hey hi honestly just and but yes yeah hmm um "
        "please remember note plus anyway again seriously sorry look listen thanks thank cool "
        "alright hello ah"
    )
)
SUBORDINATORS = frozenset(
    _words("if when whenever unless while as since because after before once until for in at on during")
)
"""An opening clause starting with one of these is an adverbial, not the main clause."""
CLAUSE_BREAKS = frozenset(_words("but though although however because"))

TASK_VERBS = frozenset(
    _words(
        "write draft compose send book schedule make fix translate summarize summarise rewrite "
        "shorten check find add remove delete put turn convert tell show give list read review "
        "look open create generate update edit change move cancel order buy plan prepare "
        "proofread remind explain describe draw calculate compare search get help set sort pick "
        "choose suggest recommend count rename copy paste run build deploy test ping forward "
        "share save print go try email reserve call"
    )
)
"""Imperatives that ask for a piece of work: a request unless a standing marker says otherwise."""
MANNER_VERBS = frozenset(
    _words(
        "reply answer respond talk speak address use keep avoid skip be stop start include cite "
        "text message format refer spell stick lead ask assume treat end begin structure sign"
    )
)
"""Imperatives about how to behave: not a request by themselves ("reply in Spanish")."""
OBJECT_DEICTICS = frozenset(_words("it them this that these those"))
ARTIFACT_DETERMINERS = frozenset(_words("the my this that our next"))
"""After a preposition in an instruction, these name one piece of work ("for the report")."""
NOT_STANDING_VERBS = frozenset(_words("want wants need needs wish wishes hope hopes plan plans try tries"))
"""Present verbs that ask or intend rather than state a default ("I want a window seat")."""
MODALS = frozenset(_words("will would should could might may must shall"))
BE = frozenset(_words("am is are be"))
HAVE_BE = frozenset(_words("have has had am is are was were be been being get gets 've"))
COMPARATIVES = frozenset(
    _words("more less fewer shorter longer simpler briefer clearer bigger smaller faster slower")
)
STATEMENT_VERBS = frozenset(
    _words(
        "prefer use live work speak keep avoid like love enjoy hate dislike want need eat drink "
        "write run track go play bake listen follow read watch code deploy draft do have own "
        "report teach take wear practice practise study learn smoke commute drive cook sleep wake "
        "attend miss support lead manage build test review commit favor favour tend rely go mean "
        "get"
    )
)
"""Base forms whose third-person form may open a model-written claim with its subject elided."""

# --------------------------------------------------------------------------- sentence structure

ADVERBS = frozenset(
    _words(
        "always never really also just only still generally absolutely definitely strongly truly "
        "totally mainly mostly usually typically normally often sometimes rarely seldom actually "
        "now currently basically fully all both even finally recently already first once "
        "seriously honestly"
    )
)
"""Skipped between a subject and its verb ("I always use ...")."""
ING_ADJECTIVES = frozenset(_words("willing outgoing boring interesting amazing easygoing"))
TRANSIENT = frozenset(
    _words(
        "stuck busy tired sick ill exhausted late ready done away back free confused lost bored "
        "hungry excited worried stressed annoyed frustrated curious at about here there almost "
        "still currently"
    )
)
"""After "I am", a state of the moment ("I'm stuck on a Python bug"), not a standing trait."""
DEFINITE = "the"
PLEASE = "please"
PAST_EXCEPTIONS = frozenset(_words("based supposed"))
WEEKDAYS = frozenset(_words("monday tuesday wednesday thursday friday saturday sunday"))
NOT_NOUNS = frozenset(
    _words(
        "is are was were will would has have had can could should 's way much many kind sort to of "
        "and or i you we he she they it me my your our his her their"
    )
)
"""Words after "this"/"that" that do not make it a deictic determiner ("this is", "that you")."""
PREPOSITIONS = frozenset(_words("for in on with about to from at into of by"))
LANGUAGES = _phrases(
    "english, spanish, french, german, portuguese, italian, dutch, japanese, chinese, mandarin, "
    "cantonese, korean, hindi, arabic, russian, polish, turkish, swedish, norwegian, danish, "
    "finnish, greek, hebrew, ukrainian, vietnamese, thai, indonesian, catalan, czech, hungarian, "
    "romanian, tagalog, bengali, urdu, tamil, swahili, persian, farsi"
)
SCOPE_PREPOSITIONS = frozenset(_words("with for on at in around among"))
"""A main clause led by "With clients, ..." or "On Fridays I ..." holds only in that scope."""
MONTHS = frozenset(
    _words(
        "january february march april may june july august september october november december lent ramadan"
    )
)
SUBJECT_PRONOUNS = frozenset(_words("i we you he she they user"))
"""Subjects after which a regular "-ed" verb is a past tense ("I switched"), not an adjective."""
INTENTIONS = frozenset(("want to", "would like to", "plan to", "planning to", "try to", "trying to"))
"""Hedges of intention; negated ("does not want to") they state a standing refusal."""
ADJECTIVE_SKIP = frozenset(_words("next same new last first whole entire"))
"""Skipped between a determiner and its noun when telling one item from many ("the next reply")."""
BEFORE_WEEKDAY = frozenset(_words("on this next last by starting from till until"))
"""A single weekday after one of these is one date ("on Monday", "starting Monday"), not every one."""
LEAD_INS = (
    "by the way",
    "just so you know",
    "for the record",
    "heads up",
    "for context",
    "for reference",
    "for what it's worth",
    "for what it is worth",
    "to be clear",
    "just to be clear",
)
"""Asides removed before reading: they neither scope nor mark a claim ("By the way, I'm vegan")."""
PLEAS = frozenset({("help",), ("help", "me"), ("please", "help"), ("help", "please")})
"""A clause that is only a plea for help asks for work now."""
QUESTION_SUBJECTS = frozenset(_words("you it there this that he she they"))
"""After a sentence-initial auxiliary ("can you", "is it", "should I"), these make a question."""
POSSESSIVES = frozenset(_words("my our his her their"))
