import pytest

from modelplane.semver import Semver, SemverError


@pytest.mark.parametrize(
    "text, parts, pre, build",
    [
        pytest.param("1.2.3", (1, 2, 3), (), (), id="plain"),
        pytest.param("0.0.0", (0, 0, 0), (), (), id="zeros"),
        pytest.param("9.0.0", (9, 0, 0), (), (), id="cuda-capability"),
        pytest.param("580.126.20", (580, 126, 20), (), (), id="driver-version"),
        pytest.param("1.0.0-rc.1", (1, 0, 0), ("rc", "1"), (), id="pre-release"),
        pytest.param("1.0.0-0A.is.legal", (1, 0, 0), ("0A", "is", "legal"), (), id="alnum-leading-digit"),
        pytest.param("1.0.0+build.01", (1, 0, 0), (), ("build", "01"), id="build-allows-leading-zero"),
        pytest.param("1.0.0-x-y+z", (1, 0, 0), ("x-y",), ("z",), id="hyphen-in-pre"),
    ],
)
def test_strict_valid(text, parts, pre, build):
    v = Semver.parse(text)
    assert (v.major, v.minor, v.patch) == parts
    assert v.prerelease == pre and v.build == build
    assert str(v) == text


@pytest.mark.parametrize(
    "text, hint",
    [
        pytest.param("v1.2.3", 'leading "v"', id="v-prefix"),
        pytest.param("1.2", "exactly three", id="short"),
        pytest.param("1", "exactly three", id="major-only"),
        pytest.param("1.2.3.4", "exactly three", id="four-parts"),
        pytest.param("01.2.3", "leading zeros", id="leading-zero-major"),
        pytest.param("1.02.3", "leading zeros", id="leading-zero-minor"),
        pytest.param("1.2.3-01", "MAJOR.MINOR.PATCH", id="leading-zero-pre"),
        pytest.param("1.2.3-", "MAJOR.MINOR.PATCH", id="empty-pre"),
        pytest.param("1.2.3+", "MAJOR.MINOR.PATCH", id="empty-build"),
        pytest.param("1.2.3-a..b", "MAJOR.MINOR.PATCH", id="empty-pre-identifier"),
        pytest.param(" 1.2.3", "MAJOR.MINOR.PATCH", id="whitespace"),
        pytest.param("", "exactly three", id="empty"),
    ],
)
def test_strict_invalid(text, hint):
    with pytest.raises(SemverError) as info:
        Semver.parse(text)
    assert hint in str(info.value)
    assert '"1.2.3"' in str(info.value)  # shows a valid example


@pytest.mark.parametrize(
    "text, expected",
    [
        pytest.param("v1.2.3", "1.2.3", id="v-prefix"),
        pytest.param("1.2", "1.2.0", id="pad-patch"),
        pytest.param("v1", "1.0.0", id="pad-minor-patch"),
        pytest.param("01.002.0003", "1.2.3", id="strip-leading-zeros"),
        pytest.param("v1.2.3-rc.1+b", "1.2.3-rc.1+b", id="full-form-keeps-suffix"),
        pytest.param("1.2.3", "1.2.3", id="already-strict"),
    ],
)
def test_normalize_valid(text, expected):
    assert str(Semver.parse(text, normalize=True)) == expected


@pytest.mark.parametrize(
    "text, hint",
    [
        pytest.param("1.2-rc.1", "short version cannot carry", id="short-with-pre"),
        pytest.param("v1+build", "short version cannot carry", id="short-with-build"),
        pytest.param("v", "up to three", id="v-only"),
        pytest.param("1.2.3.4", "up to three", id="four-parts"),
        pytest.param("1.x", "up to three", id="non-numeric"),
        pytest.param("V1.2.3", "up to three", id="capital-V"),
    ],
)
def test_normalize_invalid(text, hint):
    with pytest.raises(SemverError, match=hint):
        Semver.parse(text, normalize=True)


# semver.org §11 example chain, in increasing precedence.
PRECEDENCE = [
    "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
    "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.1", "1.1.0", "2.0.0", "10.0.0",
]


@pytest.mark.parametrize(
    "lower, higher",
    [pytest.param(a, b, id=f"{a}<{b}") for a, b in zip(PRECEDENCE, PRECEDENCE[1:], strict=False)],
)
def test_precedence(lower, higher):
    a, b = Semver.parse(lower), Semver.parse(higher)
    assert a < b and a.compare_to(b) == -1 and b.compare_to(a) == 1


def test_build_metadata_is_ignored_for_precedence_and_equality():
    a, b = Semver.parse("1.0.0+a"), Semver.parse("1.0.0+b")
    assert a == b and a.compare_to(b) == 0 and hash(a) == hash(b)


def test_semver_error_is_value_error():
    assert issubclass(SemverError, ValueError)
