#!/usr/bin/env bash
# Builds a Spark installation ("Spark home") at DEST: DEST/jars/ holds Spark and every jar it runs
# with, which is all that local-cluster[N,C,MB] needs to start executors in their own JVMs (with
# SPARK_HOME=DEST and SPARK_SCALA_VERSION=2.13). Scala 2.13 builds only: the plugin targets 2.13.
#
#   tools/spark-home.sh VERSION DEST [maven|pypi]
#
# maven (default for 3.x): spark-core and spark-sql from Maven Central, with their dependencies.
# pypi  (default for 4.x): the jars and bin/ of the pyspark source package; the only place where
#        releases absent from Maven Central (4.3.0) exist. 3.x pyspark packages carry Scala 2.12.
#
# Idempotent: a finished home has a stamp naming its version and source, and a second run with the
# same arguments returns at once. Atomic: the home is built beside DEST and renamed into place, so
# an interrupted run leaves no half-filled DEST.
set -euo pipefail

usage() { echo "usage: $0 VERSION DEST [maven|pypi]" >&2; exit 2; }
[ $# -ge 2 ] && [ $# -le 3 ] || usage
version=$1
dest=$(realpath -m "$2")
case "$version" in
  3.*) source=${3:-maven} ;;
  *)   source=${3:-pypi} ;;
esac
case "$source" in maven|pypi) ;; *) usage ;; esac

MVN=${MVN:-mvn -B -q -ntp}
# Spark 3.5's transitive dependencies bring an slf4j-api 1.7 that wins over Spark's 2.0 by Maven's
# nearest-first rule; log4j-slf4j2-impl then finds no provider and all logging silently stops.
SLF4J_VERSION=${SLF4J_VERSION:-2.0.16}
MAVEN_DEPENDENCY_PLUGIN_VERSION=3.6.1

stamp_file="$dest/.spark-home"
stamp="spark $version scala 2.13 from $source"
if [ -f "$stamp_file" ] && [ "$(cat "$stamp_file")" = "$stamp" ]; then
  exit 0
fi

mkdir -p "$(dirname "$dest")"
# One builder per DEST at a time (two make runs in parallel would otherwise race on the rename).
exec 9>"$(dirname "$dest")/.$(basename "$dest").lock"
flock 9
if [ -f "$stamp_file" ] && [ "$(cat "$stamp_file")" = "$stamp" ]; then
  exit 0
fi

work=$(mktemp -d "$(dirname "$dest")/.spark-home-$version.XXXXXX")
trap 'rm -rf "$work"' EXIT
home="$work/home"
mkdir -p "$home/jars"
started=$SECONDS

from_maven() {
  cat > "$work/pom.xml" <<POM
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.slipstream.build</groupId>
  <artifactId>spark-home</artifactId>
  <version>$version</version>
  <packaging>pom</packaging>
  <dependencyManagement>
    <dependencies>
      <dependency>
        <groupId>org.slf4j</groupId>
        <artifactId>slf4j-api</artifactId>
        <version>$SLF4J_VERSION</version>
      </dependency>
    </dependencies>
  </dependencyManagement>
  <dependencies>
    <dependency>
      <groupId>org.apache.spark</groupId>
      <artifactId>spark-core_2.13</artifactId>
      <version>$version</version>
    </dependency>
    <dependency>
      <groupId>org.apache.spark</groupId>
      <artifactId>spark-sql_2.13</artifactId>
      <version>$version</version>
    </dependency>
  </dependencies>
</project>
POM
  $MVN -f "$work/pom.xml" \
    "org.apache.maven.plugins:maven-dependency-plugin:$MAVEN_DEPENDENCY_PLUGIN_VERSION:copy-dependencies" \
    -DincludeScope=runtime -DoutputDirectory="$home/jars" >"$work/maven.log" 2>&1 \
    || { cat "$work/maven.log" >&2; return 1; }
}

from_pypi() {
  # The release's source package from PyPI, checked against the sha256 of PyPI's JSON API (the per-version
  # document, or the project's where a mirror lacks it; file URLs may be relative to the document).
  local filename
  filename=$(python3 - "$version" "$work" <<'PY'
import hashlib, json, os, sys, urllib.error, urllib.parse, urllib.request
version, work = sys.argv[1], sys.argv[2]
def get(url):
    with urllib.request.urlopen(url, timeout=60) as response:
        return json.load(response)
try:
    url = f"https://pypi.org/pypi/pyspark/{version}/json"
    files = get(url)["urls"]
except urllib.error.HTTPError:
    url = "https://pypi.org/pypi/pyspark/json"
    files = get(url)["releases"].get(version, [])
sdists = [f for f in files if f["packagetype"] == "sdist"]
if len(sdists) != 1:
    sys.exit(f"pyspark {version}: expected one source package on PyPI, found {len(sdists)}")
sdist = sdists[0]
digest = hashlib.sha256()
with urllib.request.urlopen(urllib.parse.urljoin(url, sdist["url"]), timeout=120) as response, \
        open(os.path.join(work, sdist["filename"]), "wb") as out:
    while chunk := response.read(1 << 20):
        digest.update(chunk)
        out.write(chunk)
if digest.hexdigest() != sdist["digests"]["sha256"]:
    sys.exit(f"{sdist['filename']}: sha256 {digest.hexdigest()}, PyPI says {sdist['digests']['sha256']}")
print(sdist["filename"])
PY
  )
  # Only Spark's jars and launch scripts (deps/); the Python sources, examples and data stay out.
  local top=${filename%.tar.gz}
  tar -xzf "$work/$filename" -C "$work" "$top/deps/jars" "$top/deps/bin"
  rm "$work/$filename"
  rmdir "$home/jars"
  mv "$work/$top/deps/jars" "$work/$top/deps/bin" "$home/"
}

"from_$source"

# What local-cluster will load: Spark itself of the requested version, Scala 2.13, SLF4J 2.
for required in "spark-core_2.13-$version.jar" "spark-sql_2.13-$version.jar" "spark-launcher_2.13-$version.jar"; do
  [ -f "$home/jars/$required" ] || { echo "spark-home: $required missing in $source's Spark $version" >&2; exit 1; }
done
compgen -G "$home/jars/scala-library-2.13.*.jar" >/dev/null || { echo "spark-home: no Scala 2.13 library" >&2; exit 1; }
slf4j_apis=$(cd "$home/jars" && ls slf4j-api-*.jar)
[[ "$slf4j_apis" == slf4j-api-2.* && "$slf4j_apis" != *$'\n'* ]] || { echo "spark-home: expected one slf4j-api 2.x, found: $slf4j_apis" >&2; exit 1; }

echo "$stamp" > "$home/.spark-home"
rm -rf "$dest"
mv "$home" "$dest"
echo "spark-home: Spark $version from $source in $dest ($(ls "$dest/jars" | wc -l) jars, $((SECONDS - started)) s)"
