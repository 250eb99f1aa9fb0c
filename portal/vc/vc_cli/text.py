"""What ``vc`` says on its own (the portal's messages come from the portal): Korean first,
English with ``--lang en`` / ``VC_LANG=en``, chosen once per run by ``use``."""

MESSAGES = {
    "not_found": ("{ref}: 찾을 수 없습니다", "{ref}: not found"),
    "still_running": (
        "작업 {id}: {timeout:g}초가 지나도 끝나지 않았습니다 (작업은 계속 진행됩니다)",
        "operation {id}: still running after {timeout:g}s (it goes on)",
    ),
    "no_run": ("작업 {id}: 검증 기록이 없습니다", "operation {id}: no validation run"),
    "no_settings": (
        "VC_URL과 VC_TOKEN을 설정하세요 (--url/--token 또는 설정 파일)",
        "set VC_URL and VC_TOKEN (or --url/--token, or a config file)",
    ),
    "bad_url": (
        "{url}: 포털 주소는 http:// 또는 https://로 시작해야 합니다",
        "{url}: the portal URL must start with http:// or https://",
    ),
    "config_unreadable": (
        "{path}: 설정 파일을 읽을 수 없습니다 ({reason})",
        "{path}: cannot read the config file ({reason})",
    ),
    "webhook_secret": (
        "서명 비밀은 지금 한 번만 보여 드립니다. 받는 쪽 설정에 지금 복사하세요.",
        "The signing secret is shown this once: copy it into the receiver's settings now.",
    ),
    "file_unreadable": (
        "{path}: 파일을 읽을 수 없습니다 ({reason})",
        "{path}: cannot read the file ({reason})",
    ),
    "config_shape": (
        '{path}: 설정 파일은 {{"url": "...", "token": "...", "lang": "ko"}} 형태의 JSON 객체여야'
        " 합니다",
        '{path}: the config file must be a JSON object like {{"url": "...", "token": "...",'
        ' "lang": "ko"}}',
    ),
    "config_open": (
        "경고: {path}의 권한({mode})이 너무 넓어 다른 사용자가 토큰을 읽을 수 있습니다"
        " (chmod 600 {path})",
        "WARNING: permissions {mode} for {path} are too open: other users can read the token"
        " (chmod 600 {path})",
    ),
    "redirect": (
        "{url}: 포털이 다른 주소({location})로 넘기려 합니다 (HTTP {status}). 토큰을 지키기 위해"
        " 따라가지 않습니다. VC_URL을 확인하세요",
        "{url}: the portal answered HTTP {status} pointing elsewhere ({location}); vc does not"
        " follow redirects, to keep the token where it belongs. Check VC_URL",
    ),
    "not_json": (
        "{url}: 응답이 JSON이 아닙니다 (HTTP {status}, {content_type}). VC_URL이 포털 주소인지"
        " 확인하세요",
        "{url}: the answer is not JSON (HTTP {status}, {content_type}); is VC_URL the portal?",
    ),
    "page_loop": (
        "{url}: 포털이 같은 다음 페이지를 다시 알려 줍니다. 목록을 끝까지 읽지 않고 멈춥니다",
        "{url}: the portal names the same next page again; stopping instead of reading for ever",
    ),
    "bad_answer": (
        "포털의 응답이 예상한 형태가 아닙니다 ({detail})",
        "the portal's answer is not of the expected shape ({detail})",
    ),
}

_language = ["ko"]


def use(language: str | None) -> str:
    """Choose the language of this run's messages: English for ``en…``, else Korean."""
    _language[0] = "en" if (language or "").lower().startswith("en") else "ko"
    return _language[0]


def say(key: str, **fields) -> str:
    korean, english = MESSAGES[key]
    return (english if _language[0] == "en" else korean).format(**fields)
