"""The top bar every page draws (``{% topbar %}``): the project switcher, the language switch
and who is signed in, each form posting its CSRF token and the page to come back to."""

import re
from html import escape

from django.conf import settings

from portal.iam.projects import SESSION_KEY
from portal.models import RoleBinding
from tests.conftest import builtin_role

TOPBAR = re.compile(r'<header class="topbar">.*?</header>', re.S)
CSRF = re.compile(r'<input type="hidden" name="csrfmiddlewaretoken" value="[^"<>&]+">')


def topbar(response) -> str:
    assert response.status_code == 200
    return TOPBAR.search(response.content.decode()).group()


def test_a_signed_in_reader_sees_their_projects_the_current_one_chosen(world, login):
    hostile = world.other
    hostile.name = '<b>"x"&amp;</b>'
    hostile.save()
    RoleBinding.objects.create(user=world.admin, project=hostile, role=builtin_role("viewer"))
    client = login("admin")
    session = client.session
    session[SESSION_KEY] = hostile.pk
    session.save()

    response = client.get('/clusters/?q=<a>&sort="name"', HTTP_ACCEPT_LANGUAGE="ko")
    bar = topbar(response)

    assert f'<option value="{hostile.pk}" selected>{escape(hostile.name)}</option>' in bar
    assert f'<option value="{world.demo.pk}">demo</option>' in bar
    assert "<b>" not in bar
    # Three forms (project, language, 로그아웃), each with its token; two come back here.
    assert len(CSRF.findall(bar)) == 3
    back = escape(response.wsgi_request.get_full_path())
    assert back.startswith("/clusters/?q=")
    assert bar.count(f'<input type="hidden" name="next" value="{back}">') == 2
    assert '<span class="whoami">admin</span>' in bar
    assert '<label for="project-select">프로젝트</label>' in bar
    assert 'value="en" class="link-button" lang="en">English</button>' in bar
    assert ">로그아웃</button></form>" in bar


def test_in_english_the_switch_offers_korean(world, login):
    client = login("viewer")
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"

    bar = topbar(client.get("/clusters/"))

    assert 'value="ko" class="link-button" lang="ko">한국어</button>' in bar
    assert '<label for="project-select">Project</label>' in bar
    assert ">Log out</button></form>" in bar


def test_a_user_without_a_project_gets_no_switcher(world, login):
    bar = topbar(login("norole").get("/clusters/", HTTP_ACCEPT_LANGUAGE="ko"))

    assert "project-switch" not in bar
    assert '<span class="whoami">norole</span>' in bar


def test_the_login_page_offers_only_the_language_switch(client, db):
    bar = topbar(client.get("/login/", HTTP_ACCEPT_LANGUAGE="ko"))

    assert "project-switch" not in bar and "whoami" not in bar
    assert len(CSRF.findall(bar)) == 1
    assert '<input type="hidden" name="next" value="/login/">' in bar
