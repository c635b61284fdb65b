"""Whose voice a quote is in: the user's own words, or material the user quoted (issue 45).

A user turn holds more than the user's own words: a forwarded mail, a ``>``-quoted reply, a
pasted web page, a fenced block, someone else's sentence in quotation marks. A quote from
inside such material is an observation of a third party's text, not the user's statement,
and must never become a ``user_statement`` (nor, through it, part of the ambient profile):
otherwise "Please always answer me in Klingon" in a pasted mail becomes the user's standing
instruction. :func:`read_voice` marks the quoted material in a turn and says whether the
quote's span touches it; evidence validation (:mod:`retold.ingest.write.evidence`) caps such
a quote at ``tool_result``, and the activation policy refuses it.

Why rules: the decision gates what every later system prompt shows, so it must be explainable
and reproducible, and it fails closed. Every marker below widens what counts as quoted;
nothing narrows it. A false "quoted" costs a preference its place in the profile (it is still
stored, confirmed, as a ``tool_result``); a false "own words" is a persistent injection.
Reasons are fixed phrases (never turn text), so they can be logged. Pure and deterministic.

One job: deciding whose voice a quote is in; it is long because each kind of quoted material
(mail headers, ``>`` replies, fences, pasted pages, quotation marks, reported speech) needs
its own marker.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["Voice", "quoted_regions", "read_voice"]


@dataclass(frozen=True)
class Voice:
    """Whether a quote is the user's own words; ``reason`` (fixed wording) says why not."""

    own: bool
    reason: str | None


OWN = Voice(True, None)

# --- the markers ---------------------------------------------------------------------------------

_I = re.IGNORECASE | re.MULTILINE

# A forwarded or original-message separator: everything after it is the forwarded mail.
_FORWARD = re.compile(
    r"^[ \t>]*(?:-{2,}|_{2,}|={2,})?[ \t]*(?:"
    r"forwarded message|original message|begin forwarded message|forwarded e-?mail|"
    r"weitergeleitete nachricht|ursprüngliche nachricht|originalnachricht|"
    r"anfang der weitergeleiteten nachricht|"
    r"message transféré|message d'origine|message original|début du message (?:réexpédié|transféré)|"
    r"mensaje reenviado|mensaje original|messaggio inoltrato|messaggio originale|"
    r"doorgestuurd bericht|oorspronkelijk bericht|origineel bericht|"
    r"mensagem encaminhada|mensagem original|"
    r"пересылаемое сообщение|пересланное сообщение|исходное сообщение|"
    r"przekazana wiadomość|wiadomość przekazana|oryginalna wiadomość|"
    r"vidarebefordrat meddelande|videresendt meddelelse|videresendt melding|välitetty viesti|"
    r"iletilmiş mesaj|přeposlaná zpráva|"
    r"転送されたメッセージ|転送メッセージ|元のメッセージ|转发的邮件|原始邮件|轉寄的郵件|原始郵件"
    r")[ \t]*[:：]?[ \t]*(?:-{2,}|_{2,}|={2,})?[ \t]*$",
    _I,
)
# Mail header lines. A subject line alone marks a mail; the others need a second header.
_SUBJECT_KEYS = (
    "subject|betreff|objet|asunto|oggetto|onderwerp|assunto|тема|temat|konu|ämne|emne|aihe|předmět|"
    "件名|主题|主旨"
)
_HEADER_KEYS = (
    _SUBJECT_KEYS
    + "|from|to|cc|bcc|date|sent|reply-to|von|an|datum|gesendet|kopie|de|à|a|envoyé|date|fecha|para|"
    "enviado(?: el)?|enviada em|da|inviato|data|van|aan|verzonden|verstuurd|datum|от|кому|дата|отправлено|"
    "копия|"
    "od|do|wysłano|kimden|kime|tarih|från|till|skickat|差出人|宛先|送信日時|日付|发件人|收件人|发送时间|日期|寄件者|收件者"
)
_HEADER = re.compile(rf"^[ \t>]*(?:{_HEADER_KEYS})[ \t]*[:：]", _I)
_SUBJECT = re.compile(rf"^[ \t>]*(?:{_SUBJECT_KEYS})[ \t]*[:：]", _I)
_FROM_ADDRESS = re.compile(
    r"^[ \t>]*(?:from|von|de|da|van|от|od|kimden|från|差出人|发件人|寄件者)[ \t]*[:：].*(?:@|<)", _I
)
# "On <date>, <name> wrote:" and its translations; a line ending in "<address>:" (Gmail's Russian).
_ATTRIBUTION = re.compile(
    r"(?:\b(?:wrote|writes|schrieb|a écrit|escribió|ha scritto|schreef|escreveu|skrev|kirjoitti|yazdı|"
    r"napisał(?:\(a\)|a)?|написал(?:\(а\)|а)?|пишет)|さんは書きました|写道)[ \t]*[:：]?[ \t]*$"
    r"|<[^<>\n]*@[^<>\n]*>\)?[ \t]*[:：][ \t]*$",
    _I,
)
_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")
# A separator line ("--- BEGIN DOCUMENT ---", "=====", "***"): what follows is a pasted block.
_SEPARATOR = re.compile(r"^[ \t]*(?:[-=_*~#+]{3,})(?:[ \t]*[^\n]{0,40}?[ \t]*[-=_*~#+]{3,})?[ \t]*$")
# A short heading of the user's own facts before a colon ("My allergies:", "About me:").
_OWN_HEADING = re.compile(
    r"^[ \t]*(?:my|about me|mine?|meine?|über mich|mes|mon|ma|à propos de moi|mis?|sobre mí|i miei|le mie|"
    r"il mio|la mia|mijn|over mij|meus?|minhas?|sobre mim|мои|мой|моя|обо мне|moje|mój|o mnie|mina|min|"
    r"om mig)\b(?:[ \t]+[^\s:：]+){0,2}[ \t]*[:：][ \t]*$",
    re.IGNORECASE,
)
_GT = re.compile(r"^[ \t]*(?:>|&gt;|\|)")
_INDENTED = re.compile(r"^(?: {4,}|\t)\S")
_BLOCKQUOTE = re.compile(r"<blockquote\b.*?(?:</blockquote>|\Z)", re.IGNORECASE | re.DOTALL)
_CHAT_LINE = re.compile(
    r"^[ \t]*(?:\[?\d{1,2}[:.]\d{2}(?:[:.]\d{2})?(?:\s?[ap]\.?m\.?)?\]?[ \t]*[^\n:]{1,40}:|"
    r"[^\n,]{1,40},[ \t]*\d{1,2}[:.]\d{2}[ \t]*$)",
    _I,
)
_WEB = re.compile(
    r"©|\ball rights reserved\b|\bskip to (?:main )?content\b|\bprivacy policy\b|\bterms of (?:service|"
    r"use)\b|"
    r"\bcookie (?:policy|settings|preferences)\b|\bsubscribe to our newsletter\b|\baccept (?:all )?cookies\b|"
    r"(?:[^|\n]+\|){3,}",
    re.IGNORECASE,
)
_GREETING = re.compile(
    r"^[ \t]*(?:hi|hello|hey|dear|hallo|liebe[rs]?|sehr geehrte[rs]?|guten tag|bonjour|salut|cher|chère|"
    r"madame|monsieur|"
    r"hola|estimad[oa]s?|querid[oa]|ciao|gentile|salve|caro|cara|hoi|beste|geachte|olá|prezad[oa]|caro|"
    r"привет|здравствуйте|уважаем\w*|dzień dobry|cześć|szanown\w*)\b[^\n]{0,40}[,!:]?[ \t]*$"
    r"|^[ \t]*[^\n]{1,20}(?:さん|様|さま)[ \t]*$|^[ \t]*[^\n]{1,20}(?:你好|您好)[，,!！]?[ \t]*$",
    _I,
)
_SIGN_OFF = re.compile(
    r"^[ \t]*(?:best|best regards|kind regards|warm regards|regards|cheers|thanks|thank you|many thanks|"
    r"sincerely|"
    r"yours(?: truly| sincerely)?|all the best|viele grüße|liebe grüße|beste grüße|mit freundlichen grüßen|"
    r"freundliche grüße|lg|mfg|cordialement|bien à vous|amicalement|bisous|saludos|un saludo|atentamente|"
    r"cordiali saluti|saluti|un saluto|distinti saluti|met vriendelijke groet(?:en)?|groetjes|groet|"
    r"atenciosamente|abraços|cumprimentos|с уважением|с наилучшими пожеланиями|всего доброго|pozdrawiam|"
    r"z poważaniem|よろしくお願いします|よろしくお願いいたします|敬具|此致|谢谢|祝好)[ \t]*[,.!。]?[ \t]*$",
    _I,
)
# A speech or paste cue before a colon: what follows the colon is someone else's text.
_SPEECH_COLON = re.compile(
    r"(?:\b(?:wrote|writes|said|says|say|told me|tells me|texted|posted|replied|responded|reads|read|quote|"
    r"quoted|"
    r"it says|message|email|e-mail|mail|text|sms|tweet|post|comment|review|"
    r"schrieb|schreibt|geschrieben|sagte|sagt|gesagt|meinte|meint|gemeint|steht|nachricht|"
    r"a écrit|écrit|a dit|dit|disait|message|courriel|"
    r"escribió|escribe|dijo|dice|decía|mensaje|correo|"
    r"ha scritto|scrive|ha detto|dice|diceva|messaggio|c'era scritto|"
    r"schreef|schrijft|zei|zegt|bericht|"
    r"escreveu|escreve|disse|diz|mensagem|"
    r"написал\w*|пишет|сказал\w*|говорит|сообщени\w*|письм\w*|"
    r"napisał\w*|pisze|powiedział\w*|mówi|wiadomoś\w*)"
    r"|書いてきました|書いてあります|言われました|と言っています|写道|说|写着|留言)"
    r"[^\n.!?。！？:：]{0,40}?[ \t]*[:：]",
    re.IGNORECASE,
)
# A lead-in: the user asks about material (summarize, translate, reply to, "what does this say").
_LEAD_IN = re.compile(
    r"\b(?:summari[sz]e|sum (?:it |this |that )?up|tl;?\s?dr|translate|translation|reply to|respond to|"
    r"answer (?:this|that|to this)|"
    r"draft (?:a |an )?(?:reply|response|answer)|write (?:a |an )?(?:reply|response|answer)|"
    r"what should i (?:say|answer|reply|respond)|"
    r"how (?:should|do|can) i (?:reply|respond|answer)|what (?:does|do) (?:this|that|it|these|they|she|"
    r"he) (?:say|mean|imply)|"
    r"what(?:'s| is) (?:this|that)|what do you (?:think|make) of (?:this|that|it)|is (?:this|that|"
    r"it) (?:legit|real|spam|a scam|phishing|true|a joke)|"
    r"explain (?:this|that)|proofread|paraphrase|rewrite (?:this|that)|give me the gist|the gist|"
    r"(?:here'?s|here is|these are|this is|below is)\s+(?:the|a|an|my|our|his|her|their|what|from|part|"
    r"some)\b|"
    r"(?:sent|forwarded|gave|showed) me (?:this|that|the following)|(?:got|received|found) (?:this|that|"
    r"the following)|"
    r"the following|check (?:this|it) out|check out this|look at this|thoughts\?|"
    r"zusammenfass\w*|fass\w* [^\n.?!]{0,30}zusammen|übersetz\w*|antworte [^\n.?!]{0,20}darauf|"
    r"was (?:steht|heißt|bedeutet) (?:hier|das|da)|"
    r"hier ist|schau dir [^\n.?!]{0,30}an|"
    r"résum\w*|tradui\w*|traduction|réponds? à|qu'est-ce que (?:ça|cela) (?:dit|veut dire)|(?:ça|"
    r"cela) veut dire quoi|que veut dire|voici|voilà ce que|"
    r"res[uú]m\w*|trad[uú]\w*|contesta a|responde a|qué (?:dice|significa)|aquí (?:está|tienes)|me llegó|"
    r"mira esto|"
    r"riassum\w*|rispondi a|cosa (?:dice|significa)|che significa|ecco|"
    r"samenvat\w*|vat [^\n.?!]{0,30}samen|vertaal\w*|wat (?:staat hier|betekent)|hier is|"
    r"responda a|o que (?:isso|isto) (?:diz|quer dizer|significa)|aqui está|"
    r"переска\w*|кратко|перевед\w*|что (?:здесь|тут) написано|что это значит|ответь на|вот (?:письмо|"
    r"сообщение|текст)|мне пришло|"
    r"streść|streszcz\w*|przetłumacz\w*|co to znaczy|odpowiedz na|"
    r"(?:how|what) (?:do|should|can) i (?:reply|respond|answer|say)|wie antworte ich|was antworte ich|"
    r"comment (?:lui |leur )?répondre|que (?:lui |leur )?répondre|c'est quoi le ton|"
    r"c[óo]mo (?:le |les )?respondo|qu[ée] (?:le |les )?respondo|qu[ée] quiere decir|"
    r"come (?:gli |le )?rispondo|cosa (?:gli |le )?rispondo|hoe antwoord ik|wat antwoord ik|"
    r"o que (?:eu )?respondo|como (?:eu )?respondo|как (?:ей |ему |им )?ответить|что (?:мне )?(?:ей |ему |"
    r"им )?ответить|"
    r"jak (?:mu |jej )?odpowiedzieć|co (?:mu |jej )?odpowiedzieć|hur svarar jag|översätt\w*|sammanfatta|"
    r"μετάφρασ\w*|περίληψη|번역|요약|답장)"
    r"|要約|翻訳|訳して|どういう意味|何と書いて|返信|どう返事|添削|以下の|总结|翻译|什么意思|回复|怎么回|帮我看看|發來|发来|以下",
    re.IGNORECASE,
)
_FIRST_PERSON = re.compile(r"\bI(?:'ll|'d|'ve| will| would| have)?\s+(?:\w+\s+)?$")
_EXPLICIT = frozenset(
    {
        "fenced block",
        "quoted line",
        "indented block",
        "forwarded message",
        "reply attribution",
        "mail headers",
        "chat log",
        "letter",
        "quoted block",
    }
)
"""Markers that bound material themselves: a lead-in after them refers to them, not to what precedes."""
_BOUNDED = frozenset(
    {"fenced block", "quoted line", "indented block", "quoted block", "markup", "chat log", "quotation marks"}
)
"""Material with a visible end: a lead-in right before it covers it and no more."""
_EDIT_VERB = re.compile(
    r"\b(?:fix|correct|check|proofread|rewrite|improve|polish|edit|shorten|simplify|format|convert|explain|"
    r"analy[sz]e|review|make (?:this|that|it)|turn (?:this|that|it)|clean up|"
    r"korrigier\w*|überarbeit\w*|verbesser\w*|prüf\w*|corrig\w*|vérifi\w*|améliore\w*|reformule\w*|"
    r"revis\w*|mejora\w*|reescrib\w*|correggi\w*|migliora\w*|verbeter\w*|controleer\w*|herschrijf\w*|"
    r"melhor\w*|popraw\w*|sprawdź|исправ\w*|проверь|улучши|rätta|förbättra|διόρθωσ\w*)\b",
    re.IGNORECASE,
)
_DEICTIC = re.compile(
    r"\b(?:this|these|that one|the following|below|here|attached|esto|esta|este|eso|aquí|ceci|cela|ça|ici|"
    r"ci-dessous|das hier|dies|diese[nrs]?|hier|unten|anbei|essa|esse|isso|essas|esses|aqui|abaixo|qui|sotto|"
    r"folgende\w*|questo|questa|dit|deze|isto|это|этот|эту|tego|detta|det här|den här|αυτό|이거|이 글|다음)\b"
    r"|これ|この|以下|这个|这段|这篇|这封|这条",
    re.IGNORECASE,
)
_POLITE = re.compile(
    r"\b(?:can you|could you|would you|will you|please|pls|plz|kannst du|könntest du|bitte|peux-tu|"
    r"pourrais-tu|"
    r"tu peux|s'il te plaît|puedes|podrías|por favor|puoi|potresti|per favore|kun je|kan je|alsjeblieft|"
    r"você pode|pode|можешь|пожалуйста|możesz|proszę|kan du|snälla)\b|줘|주세요|ください|请|帮我",
    re.IGNORECASE,
)
_KEEP_IN_MIND = re.compile(
    r"\b(?:remember|note|keep in mind|for the record|merk dir|merke dir|denk dran|retiens|note bien|"
    r"n'oublie pas|"
    r"apunta|recuerda|ten en cuenta|ricorda\w*|tieni presente|onthoud|lembre|anota|запомни|zapamiętaj|"
    r"kom ihåg)\b"
    r"|覚えて|记住|기억해",
    re.IGNORECASE,
)
"""A lead-in asking about material: a question about "this", or a request to edit or rework it.
"Remember this:" introduces the user's own facts instead."""
_REPORTING = re.compile(
    r"\b(?:told|tells|asked|asks|wants|wanted|reminded|warned|informed)[ \t]+(?:\w+[ \t]+){0,3}"
    r"(?:that|to)[ \t]*$"
    r"|\b(?:says|said|say|tells me|told me|told us|tells us|insists|insisted|claims|claimed|thinks|thought|"
    r"believes|believed|argues|reckons|swears|warned|warns|wrote|writes|texted|mentioned|used to say|"
    r"keeps saying|"
    r"is saying|was saying|saying)[ \t]*(?:that)?[ \t]*$"
    r"|\baccording to [^,.!?\n]{1,40},[ \t]*$"
    r"|(?:\b(?:sagt|sagte|gesagt|meint|meinte|gemeint|behauptet|findet|schreibt|schrieb|geschrieben|glaubt|"
    r"denkt)"
    r"|\b(?:dit|disait|a dit|m'a dit|pense|trouve|affirme|prétend|écrit|a écrit)"
    r"|\b(?:dice|dijo|decía|piensa|cree|opina|afirma|escribió|escribe|me dijo)"
    r"|\b(?:dice|diceva|ha detto|mi ha detto|pensa|crede|sostiene|scrive|ha scritto)"
    r"|\b(?:diz|disse|dizia|falou|fala|acha|pensa|afirma|escreveu|escreve)"
    r"|\b(?:zegt|zei|vindt|denkt|beweert|schreef|schrijft)"
    r"|\b(?:mówi|powiedział\w*|twierdzi|uważa|pisze|napisał\w*)"
    r"|\b(?:говорит|сказал\w*|считает|думает|пишет|написал\w*|утверждает)"
    r"|\b(?:säger|sa|sade|tycker|skrev)"
    r"|\b(?:είπε|λέει|έγραψε|γράφει)|\b(?:bảo|nói|bảo là|nói là|nói rằng)|\b(?:bilang|katanya|mengatakan)"
    r"|\b(?:сказав|сказала|каже|написав|написала)|(?:قال|قالت|يقول|تقول|كتب)(?:\s+(?:إن|إنه|إننا|أن|لي))?"
    r"|(?:ने\s+)?(?:कहा|बोला|बोली|लिखा)(?:\s+कि)?)"
    r"[ \t]*,?[ \t]*(?:that|dass|que|qu'|che|dat|że|что|att|ότι|πως|rằng|là|bahwa|що|कि)?[ \t]*$"
    r"|(?<!我)(?:说|认为|觉得|讲)[，,：:]?[ \t]*$",
    re.IGNORECASE,
)
"""A reporting frame right before a quote: what follows is someone's claim, in the user's retelling."""
_FIRST_PERSON_FRAME = re.compile(
    r"(?:^|[\s,;])(?:i|we|ich|wir|je|j'|nous|yo|nosotros|io|noi|ik|wij|eu|nós|я|мы|jag|"
    r"vi)\s+(?:\w+\s+){0,2}\S*$",
    re.IGNORECASE,
)
_REPORTED_AFTER = re.compile(
    r"^(?:だ|です)?(?:と|って)(?:言|い|書|話)"  # Japanese: 〜と言っていました
    r"|^[ \t]*(?:라고|다고|자고|냐고)[ \t]*(?:했|하|말)"  # Korean: 〜라고 했어요
)
_REPORTED_TAIL = re.compile(r"(?:라고|다고|자고|냐고)$")  # a Korean quote that ends in its own 라고
# Turkish: the clause before "söyledi" ("... gerektiğini söyledi", "... dedi").
_REPORTED_AFTER_TR = re.compile(r"^[ \t]*(?:söyledi|söylüyor|dedi|diyor|yazdı)", re.IGNORECASE)
_CHAT_SPEAKER = re.compile(r"^[ \t]*(?:\[[^\]\n]{1,30}\][ \t]*)?[^\W\d_][^\n:：]{0,24}?[ \t]*[:：][ \t]*\S")
_CHAT_HEADER = re.compile(
    r"^[^\n]{1,40}[ \t][—–-][ \t](?:today|yesterday|heute|gestern|aujourd'hui|hier|hoy|ayer|oggi|ieri|"
    r"vandaag|"
    r"gisteren|hoje|ontem|сегодня|вчера|dzisiaj|wczoraj|idag|igår|\d)[^\n]{0,30}$",
    re.IGNORECASE,
)
_PAGE = re.compile(
    r"^[^\n]{1,30}(?:[ \t][>›»/|][ \t][^\n]{1,30}){2,}$"
    r"|\b(?:last updated|updated on|published (?:on|by)|\d+ min read|read more|share on (?:facebook|"
    r"twitter|x)|"
    r"subscribe (?:to our|now|for)|from wikipedia|the free encyclopedia|publié le|partager sur|lire la suite|"
    r"abonnez-vous à|zuletzt aktualisiert|veröffentlicht am|teilen auf|weiterlesen|jetzt abonnieren|"
    r"actualizado el|publicado el|compartir en|leer más|suscríbete a|pubblicato il|aggiornato il|"
    r"condividi su|"
    r"iscriviti alla|bijgewerkt op|gepubliceerd op|delen op|lees meer|atualizado em|publicado em|"
    r"compartilhar (?:no|em)|assine (?:a nossa|o nosso)|обновлено:|опубликовано:|поделиться в|подпишитесь на|"
    r"opublikowano:|zaktualizowano:|udostępnij na|subskrybuj nasz)"
    r"|维基百科|ウィキペディア|跳转到|查看历史|\d{4}年\d{1,2}月\d{1,2}日[ \t]*(?:更新|公開|发布)",
    re.IGNORECASE | re.MULTILINE,
)
_TO_ASSISTANTS = re.compile(
    r"\b(?:(?:note|message|instructions?) (?:to|for) (?:any |all |the )?(?:ai |llm )?(?:assistants?|bots?|"
    r"models?)|"
    r"(?:any|all) (?:ai )?(?:assistants?|bots?|llms?|models?) (?:reading|that reads?|who reads?)|"
    r"(?:assistants?|bots?|llms?) reading this|ai assistants?\s*[:,]|"
    r"ki-assistent\w*|assistant(?:e)? (?:ia|ai)\b|l'assistant\s*:|asistente de ia|cualquier asistente|"
    r"assistente (?:ia|ai|virtuale)|ai-assistent\w*|ии-ассистент\w*|asystent\w* ai)"
    r"|AI助手|AIアシスタント|AI 어시스턴트|致AI",
    re.IGNORECASE,
)
_HTML = re.compile(r"<!--.*?(?:-->|\Z)|</?[a-zA-Z][a-zA-Z0-9]*(?:\s[^<>]*)?>", re.DOTALL)
_SENTENCE_END = re.compile(r"[.!?。！？:：\n]")
_OPENERS: dict[str, str] = {
    "“": "”", "„": "“”", "‚": "‘’", "«": "»", "»": "«", "‹": "›", "›": "‹", "「": "」", "『": "』",
    "〝": "〞〟", "＂": "＂", '"': '"', "‘": "’", "'": "'", "”": "”",
}  # fmt: skip
_WORD = re.compile(r"\w+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")

LONG_WORDS = 100
"""A turn longer than this is read as pasted material as a whole: own statements are short."""
LONG_CHARS = 1500
"""The same in characters (punctuation runs and markup hold few words); it also bounds the work."""
LONG_BLOCK_WORDS = 60
"""A paragraph (blank-line separated) this long inside a turn with other text is pasted."""
QUOTED_PHRASE_WORDS = 4
"""A quoted phrase this long inside the quote is someone's sentence, not a scare quote or a title."""


# --- regions ---------------------------------------------------------------------------------------


def _words(text: str) -> int:
    """Words, counting two CJK characters as one (CJK text has no spaces)."""
    cjk = len(_CJK.findall(text))
    return len(_WORD.findall(_CJK.sub(" ", text))) + (cjk + 1) // 2


def _long(text: str) -> bool:
    """A turn too long to be the user's own words around a quote: read as material as a whole."""
    return len(text) > LONG_CHARS or _words(text) > LONG_WORDS


def _lines(text: str) -> list[tuple[int, int, str]]:
    out, pos = [], 0
    for line in text.split("\n"):
        out.append((pos, pos + len(line), line))
        pos += len(line) + 1
    return out


def _quote_marks(text: str) -> list[tuple[int, int, bool]]:
    """Paired quotation marks as ``(start, end, closed)``; an unclosed mark runs to the end."""
    out: list[tuple[int, int, bool]] = []
    stack: list[tuple[int, str]] = []
    n = len(text)
    for i, c in enumerate(text):
        prev = text[i - 1] if i else " "
        nxt = text[i + 1] if i + 1 < n else " "
        if stack and c in stack[-1][1]:
            if c in "'’" and (prev.isspace() or nxt.isalnum()):
                continue  # an apostrophe (don't, l'eau), not a closing mark
            start, _ = stack.pop()
            out.append((start, i + 1, True))
            continue
        if c not in _OPENERS:
            continue
        if c in "'’‘" and (not (prev.isspace() or prev in '([{:—–-"“«„') or nxt.isspace()):
            continue  # inside or after a word: an apostrophe
        if c == "’":
            continue  # a right single mark opens nothing
        if c in '"＂”' and nxt.isspace() and not prev.isspace() and not stack:
            continue  # a stray closing straight quote
        stack.append((i, _OPENERS[c]))
    out.extend((start, n, False) for start, closer in stack if closer not in ("'", "’"))
    return out


def _paragraphs(text: str) -> list[tuple[int, int]]:
    out, start = [], 0
    for m in re.finditer(r"\n[ \t]*\n", text):
        out.append((start, m.start()))
        start = m.end()
    out.append((start, len(text)))
    return [(s, e) for s, e in out if text[s:e].strip()]


def _letter_start(text: str, line_start: int) -> int:
    """Where a letter ending in a sign-off at ``line_start`` begins: its paragraph, or the one
    before when the sign-off opens a paragraph of its own."""
    paragraphs = _paragraphs(text)
    k = next((i for i, (s, e) in enumerate(paragraphs) if s <= line_start <= e), 0)
    if paragraphs and paragraphs[k][0] == line_start and k > 0:
        k -= 1
    return paragraphs[k][0] if paragraphs else 0


def _sentence_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    """The sentence around ``[start, end)``: back to the previous end mark, on to the next."""
    s = start
    while s > 0 and not _SENTENCE_END.match(text[s - 1]):
        s -= 1
    m = _SENTENCE_END.search(text, end)
    e = m.end() if m else len(text)
    return s, e


@lru_cache(maxsize=256)
def quoted_regions(turn: str) -> tuple[tuple[int, int, str], ...]:
    """The spans of ``turn`` that are quoted, pasted or forwarded material, each with its marker.

    Spans may overlap; a quotation-mark span is reported with the marker ``quotation marks``
    and judged against the quote by :func:`read_voice` (a short quoted phrase inside the
    user's own sentence is a scare quote or a title, not material).
    """
    n = len(turn)
    if _long(turn):
        return ((0, n, "a long turn"),)
    regions: list[tuple[int, int, str]] = []
    lines = _lines(turn)

    def to_end(start: int, why: str) -> None:
        regions.append((start, n, why))

    fence_open: int | None = None
    for k, (s, e, line) in enumerate(lines):
        if _FENCE.match(line):
            if fence_open is None:
                fence_open = s
            else:
                regions.append((fence_open, e, "fenced block"))
                fence_open = None
            continue
        if fence_open is not None:
            continue
        if _GT.match(line):
            regions.append((s, e, "quoted line"))
        elif _INDENTED.match(line):
            regions.append((s, e, "indented block"))
        if _FORWARD.match(line):
            to_end(s, "forwarded message")
        elif _ATTRIBUTION.search(line):
            to_end(s, "reply attribution")
        elif (
            _SUBJECT.match(line)
            or _FROM_ADDRESS.match(line)
            or (_HEADER.match(line) and any(_HEADER.match(o) for _, _, o in lines[k + 1 : k + 6]))
        ):
            to_end(s, "mail headers")
        elif _CHAT_LINE.match(line) and any(_CHAT_LINE.match(o) for _, _, o in lines[k + 1 : k + 6]):
            to_end(s, "chat log")
        elif _GREETING.match(line) and k > 0:
            to_end(s, "letter")
        elif _SIGN_OFF.match(line):
            regions.append((_letter_start(turn, s), e, "letter"))
    if fence_open is not None:
        to_end(fence_open, "fenced block")
    for m in _BLOCKQUOTE.finditer(turn):
        regions.append((m.start(), m.end(), "quoted block"))
    _chat_regions(turn, lines, regions)
    tags = list(_HTML.finditer(turn))
    if len(tags) >= 2 or any(t.group().startswith("<!--") for t in tags):
        regions.append((_line_start(turn, tags[0].start()), _line_end(turn, tags[-1].end()), "markup"))
    for qs, qe, closed in _quote_marks(turn):
        regions.append((qs, qe, "quotation marks" if closed else "unclosed quotation mark"))
    if _WEB.search(turn) or _PAGE.search(turn):
        regions.append((0, n, "web page"))
    paragraphs = _paragraphs(turn)
    for m in _TO_ASSISTANTS.finditer(turn):
        para = next(((ps, pe) for ps, pe in paragraphs if ps <= m.start() <= pe), (0, n))
        regions.append((para[0], para[1], "text addressed to assistants"))
    for m in _SPEECH_COLON.finditer(turn):
        if _FIRST_PERSON.search(turn, max(0, m.start() - 16), m.start()):
            continue  # "I said it before:" is the user speaking
        para_end = next((e for s, e in paragraphs if s <= m.end() <= e), n)
        quoted = [r for r in regions if r[2] == "quotation marks"]
        end = _material_end(turn, m.end(), quoted)
        regions.append((m.end(), min(end, max(para_end, m.end())), "reported text"))
    bounded = [r for r in regions if r[2] in _BOUNDED]
    for m in _LEAD_IN.finditer(turn):
        s, e = _sentence_bounds(turn, m.start(), m.end())
        after = turn[e:].strip()
        before = turn[:s].strip()
        if after:
            regions.append((e, _material_end(turn, e, bounded), "material after a lead-in"))
        if before and (not after or _words(before) > 25):
            marked = [r for r in regions if r[2] in _EXPLICIT and r[1] <= s]
            start = min((r[0] for r in marked), default=0)
            regions.append((start, s, "material before a lead-in"))
    for m in _SENTENCE_OPENER.finditer(turn):
        s, e = _sentence_bounds(turn, m.start(), m.start())
        if not _asks_about_material(turn, s, e):
            continue
        if turn[e:].strip():
            regions.append((e, _material_end(turn, e, bounded), "material after a lead-in"))
        elif re.search(r"\n[ \t]*\n[ \t]*$", turn[:s]):  # a question of its own below a block
            marked = [r for r in regions if r[2] in _EXPLICIT and r[1] <= s]
            regions.append((min((r[0] for r in marked), default=0), s, "material before a lead-in"))
    if len(paragraphs) > 1:
        for s, e in paragraphs:
            if _words(turn[s:e]) >= LONG_BLOCK_WORDS:
                regions.append((s, e, "a long pasted block"))
    _structure_regions(turn, lines, paragraphs, bounded, regions)
    return tuple(regions)


def _structure_regions(
    turn: str,
    lines: list[tuple[int, int, str]],
    paragraphs: list[tuple[int, int]],
    bounded: list[tuple[int, int, str]],
    regions: list[tuple[int, int, str]],
) -> None:
    """Material known by the turn's layout alone, in any language: what follows a separator
    line, a line that ends in a colon (but a short heading of the user's own facts, "My
    allergies:", or "Remember:"), or a first paragraph that asks or points at something
    ("Aus welchem Lied ist das?", "my coworker posted this"). Fail closed: such material runs
    to the end of the turn unless a bounded block visibly ends it, so own words after it are
    not recovered (a user's own facts below their question are read as quoted)."""
    n = len(turn)
    for _, e, line in lines:
        rest = turn[e:].strip()
        if not rest:
            break
        if _SEPARATOR.match(line) and line.strip():
            regions.append((e, n, "a separated block"))
            break
        text = line.strip()
        own_facts = _OWN_HEADING.match(line) or _KEEP_IN_MIND.match(text)
        if text.endswith((":", "：")) and not (own_facts and not _SPEECH_COLON.search(text)):
            regions.append((e, _material_end(turn, e, bounded), "material after a colon"))
    first = turn[paragraphs[0][0] : paragraphs[0][1]] if paragraphs else ""
    pointing = _DEICTIC.search(first) is not None or "?" in first or "？" in first
    own_facts = _KEEP_IN_MIND.match(first.strip()) and not _EDIT_VERB.search(first)
    if len(paragraphs) > 1 and pointing and not own_facts:
        start = paragraphs[1][0]
        end = _material_end(turn, start, bounded)
        regions.append((start, end, "material after a pointing paragraph"))


_SENTENCE_OPENER = re.compile(r"(?:^|(?<=[.!?。！？:：\n]))[ \t]*\S", re.MULTILINE)


def _line_start(text: str, pos: int) -> int:
    return text.rfind("\n", 0, pos) + 1


def _line_end(text: str, pos: int) -> int:
    end = text.find("\n", pos)
    return len(text) if end < 0 else end


def _asks_about_material(turn: str, start: int, end: int) -> bool:
    """Whether the sentence ``turn[start:end]`` (ending in a colon or a question mark) asks about
    material: a question about "this", an edit request, or a polite request about "this"."""
    if turn[end - 1 : end] not in ":：?？":
        return False
    sentence = turn[start:end]
    if _KEEP_IN_MIND.search(sentence) and not _EDIT_VERB.search(sentence):
        return False
    if _EDIT_VERB.search(sentence):
        return True
    deictic = _DEICTIC.search(sentence) is not None
    return deictic and (sentence.endswith(("?", "？")) or _POLITE.search(sentence) is not None)


def _material_end(turn: str, start: int, bounded: list[tuple[int, int, str]]) -> int:
    """Where the material a lead-in introduces at ``start`` ends: the end of the bounded blocks that
    begin right there (a fence, ``>`` lines, an indented block, a chat log, a quotation) when
    nothing but punctuation follows them on their last line, else the end of the turn (fail
    closed: material without a visible end runs on)."""
    pos = start
    while pos < len(turn) and turn[pos].isspace():
        pos += 1
    end = None
    while True:
        nxt = [r for r in bounded if r[0] <= pos < r[1]]
        if not nxt:
            break
        end = max(r[1] for r in nxt)
        pos = end
        while pos < len(turn) and turn[pos] in " \t\n" and turn[pos : pos + 1] != "":
            if turn[pos] == "\n" and turn[pos + 1 : pos + 2] == "\n":
                break  # a blank line ends the material unless another block starts right after it
            pos += 1
        if pos < len(turn) and turn[pos] == "\n":
            while pos < len(turn) and turn[pos].isspace():
                pos += 1
            if not any(r[0] <= pos < r[1] for r in bounded):
                break
    if end is None or not turn[end:].strip():
        return len(turn)
    if turn[end : _line_end(turn, end)].strip(" \t.!?,;:。！？、，)»”’\"'"):
        return len(turn)  # more text on the block's last line: the material may go on there
    return end


def _chat_regions(turn: str, lines: list[tuple[int, int, str]], regions: list[tuple[int, int, str]]) -> None:
    """A chat log or transcript: two or more speaker lines ("Alice: ...", "[9:02] Bob: ...") in one
    block of lines, or a line naming a speaker and a time ("name — Today at 8:41 PM")."""
    block: list[tuple[int, int, str]] = []
    for line in [*lines, (len(turn), len(turn), "")]:
        if line[2].strip():
            block.append(line)
            continue
        speakers = [b for b in block if _CHAT_SPEAKER.match(b[2])]
        headers = [b for b in block if _CHAT_HEADER.match(b[2])]
        if len(speakers) >= 2 or headers:
            regions.append((block[0][0], block[-1][1], "chat log"))
        block = []


def _reported(turn: str, qs: int, qe: int) -> bool:
    """Whether the quote is the clause of a reporting frame ("my wife says <quote>")."""
    start, _ = _sentence_bounds(turn, qs, qs)
    before = turn[max(start, qs - 80) : qs]
    frame = _REPORTING.search(before)
    if frame is not None and not _FIRST_PERSON_FRAME.search(before[: frame.start()] + "x"):
        return True
    after = turn[qe : qe + 8]
    if _REPORTED_TAIL.search(turn[qs:qe]) and re.match(r"^[ \t]*(?:했|하|말)", after):
        return True
    return bool(_REPORTED_AFTER.match(after) or _REPORTED_AFTER_TR.match(turn[qe : qe + 12]))


def _spans(turn: str, quote: str) -> list[tuple[int, int]]:
    """Every place the whitespace-normalised quote occurs in ``turn``, as raw spans."""
    words = quote.split()
    if not words:
        return []
    pattern = r"\s+".join(re.escape(w) for w in words)
    return [(m.start(), m.end()) for m in re.finditer(pattern, turn)]


def read_voice(turn: str, quote: str) -> Voice:
    """Is ``quote`` (found in the user turn ``turn``) in the user's own voice?

    Not when any occurrence of it touches quoted, pasted or forwarded material; not when
    it cannot be located (fail closed). A quotation-mark span counts when the quote starts
    or ends inside it, or holds it whole and it is a sentence (``QUOTED_PHRASE_WORDS`` words
    or more) rather than a scare quote or a title.
    """
    if _long(turn):
        return Voice(False, "the quote is inside a long turn")
    spans = _spans(turn, quote)
    if not spans:
        return Voice(False, "the quote is not in the turn as written")
    regions = quoted_regions(turn)
    for qs, qe in spans:
        if _reported(turn, qs, qe):
            return Voice(False, "the quote is reported speech")
        for rs, re_, why in regions:
            if qe <= rs or qs >= re_:
                continue
            if why == "quotation marks" and qs <= rs and re_ <= qe:
                inner = turn[rs + 1 : re_ - 1]
                if _words(inner) < QUOTED_PHRASE_WORDS:
                    continue  # "Inception", „Falke“: a title or a scare quote in the user's sentence
            return Voice(False, f"the quote is inside {why}")
    return OWN
