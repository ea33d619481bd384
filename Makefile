# Slipstream: one entry point for both build tools (cargo for native/, Maven for jvm/).
#   make demo   install what is missing, build, run every ohb suite and write the report (report/index.html)
#   make test   install what is missing, build, run every test
SHELL := /bin/bash
.ONESHELL:
.SHELLFLAGS := -eu -o pipefail -c

ROOT        := $(CURDIR)
CARGO       ?= cargo
MVN         ?= mvn -B -q -ntp
OHB         := $(ROOT)/native/target/release/ohb
# Debian packages the build, the tests and the benchmarks need (fonts-dejavu-core: the text of
# ohb report's PNG charts; chromium: the report's headless-browser test).
APT_PACKAGES := libucx-dev ucx-utils libclang-dev clang pkg-config build-essential \
                openjdk-17-jdk-headless maven procps \
                memcached libmemcached-tools python3-pymemcache \
                python3-pip unzip iproute2 fonts-dejavu-core chromium
# cargo-fuzz drives the cache parsers' fuzz targets (stable Rust, RUSTC_BOOTSTRAP=1).
CARGO_FUZZ_VERSION := 0.13.2
DEPS_STAMP  := $(ROOT)/build/.deps-$(shell echo $(APT_PACKAGES) | md5sum | cut -c1-8)

.PHONY: all deps build native jvm test test-native test-jvm test-fuzz smoke demo bench bench-mem clean spark-homes \
        ucx-1.22 native-ucx-1.22 test-ucx-1.22

all: build

# System packages: installed only when one is missing (apt-get needs root, as on the CI machine).
deps: $(DEPS_STAMP)
$(DEPS_STAMP):
	@missing=$$(for p in $(APT_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q "ok installed" || echo $$p; done)
	if [ -n "$$missing" ]; then
	  echo "installing: $$missing"
	  SUDO=$$( [ "$$(id -u)" = 0 ] && echo "" || echo sudo )
	  $$SUDO apt-get update -qq
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing
	fi
	command -v $(CARGO) >/dev/null || { echo "cargo (Rust >= 1.82) is needed: https://rustup.rs"; exit 1; }
	pkg-config --atleast-version=1.13 ucx || { echo "UCX >= 1.13 not found by pkg-config"; exit 1; }
	cargo fuzz --version 2>/dev/null | grep -q "$(CARGO_FUZZ_VERSION)" || $(CARGO) install -q --locked cargo-fuzz --version =$(CARGO_FUZZ_VERSION)
	mkdir -p $(dir $@) && touch $@

build: native jvm

# The two libraries the fabric's jar carries, as `jar/` beside them without their debug info (12 MB
# -> 1.5 MB; symbols stay, so profiles still name functions): every JVM that starts a fabric node
# inflates them out of the jar, and inflating 12 MB was most of a MapReduce reducer's fabric start
# (docs/mapreduce-shuffle.md). jvm/fabric's pom packs ${native.dir}/jar.
FABRIC_JAR_LIBS := libslipstream_fabric_jni.so libslipstream_fabric_preload.so
define fabric_jar_libs
	mkdir -p $(1)/jar
	for lib in $(FABRIC_JAR_LIBS); do objcopy --strip-debug $(1)/$$lib $(1)/jar/$$lib; done
endef

native: deps
	cd native && $(CARGO) build --release --workspace --bins --lib
	cd ..
	$(call fabric_jar_libs,native/target/release)

jvm: native
	$(MVN) -f jvm/pom.xml install -DskipTests

# The closing line counts both runners: cargo's summaries and Surefire's reports.
test: test-native test-jvm test-fuzz smoke test-ucx-1.22
	@rust_passed=$$(cat build/test-native.log build/test-ucx-1.22.log | awk '/^test result:/ {p+=$$4} END {print p+0}')
	rust_failed=$$(cat build/test-native.log build/test-ucx-1.22.log | awk '/^test result:/ {f+=$$6} END {print f+0}')
	jvm_tests=$$(cat jvm/*/target/surefire-reports/TEST-*.xml $(UCX122_JVM_BUILD)/surefire-reports/TEST-*.xml | grep -o 'tests="[0-9]*"' | head -n 1000 | tr -dc '0-9\n' | awk '{t+=$$1} END {print t+0}')
	jvm_failed=$$(cat jvm/*/target/surefire-reports/TEST-*.xml $(UCX122_JVM_BUILD)/surefire-reports/TEST-*.xml | grep -oE '(failures|errors)="[0-9]*"' | tr -dc '0-9\n' | awk '{t+=$$1} END {print t+0}')
	echo "make test: $$((rust_passed + jvm_tests - jvm_failed)) passed, $$((rust_failed + jvm_failed)) failed"

test-native: deps
	mkdir -p build
	cd native && $(CARGO) test --release --workspace 2>&1 | tee ../build/test-native.log

test-jvm: native spark-homes
	$(MVN) -f jvm/pom.xml install

# A second UCX: 1.22 from PyPI's libucx-cu12 wheel (headers, pkg-config files, libraries, ucx_info,
# ucx_perftest; no verbs), pinned by version and sha256. The fabric, its JNI library and the JVM fabric
# suite are built and tested against it a second time, in their own directories, so that the API and
# behaviour of a current UCX are checked as well as Debian's 1.13. ucx-sys finds it through
# PKG_CONFIG_PATH; the rpath makes every binary load the same libraries it was built against
# (ucx-sys's test runtime_library_is_the_one_built_against fails otherwise).
UCX122_VERSION   := 1.22.0
UCX122_SHA256    := 5cbbef0c140a0a158ae3486089af659b38822b2234cd3dc90ba40a5e6553402a
UCX122_DIR       := $(ROOT)/build/ucx/1.22
UCX122_LIB       := $(UCX122_DIR)/libucx/lib
UCX122_TARGET    := $(ROOT)/native/target/ucx-1.22
UCX122_JVM_BUILD := $(ROOT)/build/jvm-ucx-1.22/fabric
UCX122_ENV       := PKG_CONFIG_PATH=$(UCX122_LIB)/pkgconfig CARGO_TARGET_DIR=$(UCX122_TARGET) \
                    RUSTFLAGS="-C link-arg=-Wl,-rpath,$(UCX122_LIB)"
UCX122_CRATES    := -p ucx-sys -p fabric -p fabric-jni -p fabric-jni-preload

ucx-1.22: deps
	tools/ucx-wheel.sh $(UCX122_VERSION) $(UCX122_SHA256) $(UCX122_DIR)

# The ldd checks read ldd's whole output (grep without -q): `grep -q` exits at its first match, and
# under pipefail an ldd still writing then dies of SIGPIPE and fails the check (seen under load).
native-ucx-1.22: ucx-1.22
	cd native && $(UCX122_ENV) $(CARGO) build --release $(UCX122_CRATES)
	cd ..
	$(call fabric_jar_libs,$(UCX122_TARGET)/release)
	ldd $(UCX122_TARGET)/release/libslipstream_fabric_jni.so | grep "libucp.so.0 => $(UCX122_LIB)/libucp.so.0" >/dev/null \
	  || { ldd $(UCX122_TARGET)/release/libslipstream_fabric_jni.so; echo "the JNI library does not load UCX $(UCX122_VERSION)"; exit 1; }

# Rust: ucx-sys (its version test prints the loaded UCX), fabric (unit, two-process and netns tests),
# fabric-jni. JVM: jvm/fabric's suite with the 1.22-built library packed in, built under build/.
test-ucx-1.22: native-ucx-1.22
	mkdir -p build
	cd native
	$(UCX122_ENV) $(CARGO) test --release -p ucx-sys -- --show-output 2>&1 | tee ../build/test-ucx-1.22.log
	$(UCX122_ENV) $(CARGO) test --release -p fabric -p fabric-jni -p fabric-jni-preload 2>&1 | tee -a ../build/test-ucx-1.22.log
	cd ..
	grep -q "UCX at run time: $(UCX122_VERSION)" build/test-ucx-1.22.log \
	  || { echo "test-ucx-1.22: the tests did not run on UCX $(UCX122_VERSION)"; exit 1; }
	$(MVN) -f jvm/pom.xml -pl fabric test -Dnative.dir=$(UCX122_TARGET)/release -Dfabric.build.directory=$(UCX122_JVM_BUILD)
	ldd $(UCX122_JVM_BUILD)/classes/native/linux-x86_64/libslipstream_fabric_jni.so | grep "$(UCX122_LIB)/libucp.so.0" >/dev/null \
	  || { echo "test-ucx-1.22: the JVM suite ran with a library that does not load UCX $(UCX122_VERSION)"; exit 1; }
	echo "test-ucx-1.22: Rust and JVM fabric suites passed on UCX $(UCX122_VERSION)"

# Real Spark installations for the integration tests (jvm/spark-it): local-cluster[2,1,1024] starts
# executors in their own JVMs from a SPARK_HOME's jars/. 3.5 comes from Maven Central, the newest 4.x
# from PyPI's pyspark package (the only place it exists). homes.txt tells the tests which to run on.
SPARK35_VERSION := 3.5.8
SPARK4_VERSION  := 4.3.0
SPARK_HOMES_DIR := $(ROOT)/build/spark
spark-homes: deps
	tools/spark-home.sh $(SPARK35_VERSION) $(SPARK_HOMES_DIR)/$(SPARK35_VERSION)
	tools/spark-home.sh $(SPARK4_VERSION) $(SPARK_HOMES_DIR)/$(SPARK4_VERSION)
	printf '%s\n' $(SPARK35_VERSION) $(SPARK4_VERSION) > $(SPARK_HOMES_DIR)/homes.txt

# The parsers of network input under libFuzzer, a bounded time each: the cache's protocols and the
# fabric's wire format and reassembly (a crash fails the build and leaves its input in
# native/cache-proto/fuzz/artifacts/ or native/fabric/fuzz/artifacts/). Both run even if the first fails.
FUZZ_SECONDS ?= 30
test-fuzz: deps
	status=0
	native/cache-proto/fuzz/run.sh $(FUZZ_SECONDS) || status=1
	native/fabric/fuzz/run.sh $(FUZZ_SECONDS) || status=1
	exit $$status

# The benchmark harness end to end, briefly (figures are not checked: targets live in benchmarks).
# Tables go to build/smoke-*.txt; stderr stays on the terminal: a failed point makes ohb exit
# non-zero and name the point and the reason there. Under `make test` the jars test-jvm installed are
# the build (a second `mvn install -DskipTests` re-shaded every jar: 75 s of a clean run).
smoke: $(if $(filter test,$(MAKECMDGOALS)),test-jvm,build) spark-homes
	$(OHB) fabric lat --quick --no-progress --json build/smoke-lat.json >build/smoke-lat.txt
	$(OHB) fabric lat --quick --jvm --no-progress --json build/smoke-lat-jvm.json >build/smoke-lat-jvm.txt
	$(OHB) mem lat --sizes 32 --iterations 200 --no-progress --json build/smoke-mem-lat.json >build/smoke-mem-lat.txt
	$(OHB) mem hybrid --quick --no-progress --json build/smoke-mem-hybrid.json >build/smoke-mem-hybrid.txt
	$(OHB) spark groupby --quick --configs vanilla,plugin,plugin-tcp --no-progress --json build/smoke-spark-groupby.json >build/smoke-spark-groupby.txt
	$(OHB) spark sortby --quick --configs vanilla,plugin,plugin-tcp --no-progress --json build/smoke-spark-sortby.json >build/smoke-spark-sortby.txt
	$(OHB) spark sql --quick --configs vanilla,plugin --no-progress --json build/smoke-spark-sql.json >build/smoke-spark-sql.txt
	$(OHB) mapreduce avg --quick --no-progress --json build/smoke-mapreduce.json >build/smoke-mapreduce.txt
	$(OHB) rpc lat --quick --no-progress --json build/smoke-rpc-lat.json >build/smoke-rpc-lat.txt
	$(OHB) hdfs srl --quick --iterations 3 --no-progress --json build/smoke-hdfs.json >build/smoke-hdfs.txt
	$(OHB) hdfs swl --quick --iterations 3 --no-progress --json build/smoke-hdfs-swl.json >build/smoke-hdfs-swl.txt
	@echo "smoke: ohb ran (fabric: Rust and JVM; cache: memcached, TCP, fabric, hybrid with extstore; Spark groupby/sortby and MapReduce: vanilla, plugin, plugin over TCP; Spark SQL: vanilla, plugin; Hadoop RPC lat: vanilla, fabric, fabric over TCP; HDFS srl: also short-circuit; HDFS swl); tables in build/smoke-*.txt"

# Every suite once, side by side, then the report. MapReduce at a quarter of its benchmark size
# (256 MiB of map output per test instead of 1.05 GB: nine jobs on two mini clusters); `make bench`
# runs the full sizes that docs/benchmarks.md records. `ohb hbase` at full size (about 6.5 min against
# 1.5): with --quick's 1000 warm-up rows each configuration measures its own cold client JVM (p50
# 300-360 us on every transport; warm, Netty about 200 us and the fabric 36 us; session 43).
# `ohb hdfs meta` at full size too (about 4 min against 1): session 43's demo missed all three
# --quick targets (1.27x/1.06x/0.66x) and the full run 3 minutes later met them (2.61x/2.02x/1.07x).
demo: build spark-homes
	$(OHB) fabric all
	$(OHB) fabric all --jvm
	$(OHB) mem all
	$(OHB) spark all
	$(OHB) mapreduce all --records 65536
	$(OHB) rpc lat
	$(OHB) rpc thr
	$(OHB) rpc callbench --quick
	$(OHB) hdfs meta
	$(OHB) hbase
	$(OHB) hdfs all --quick
	$(OHB) hdfs dfsio --quick
	$(OHB) hdfs tiers --quick
	$(OHB) hdfs tiers skew --quick
	$(OHB) hdfs tiers dfsio --quick
	$(OHB) report

# Full benchmark runs for docs/benchmarks.md (results/ holds the JSON).
bench: build spark-homes
	$(OHB) fabric all
	$(OHB) fabric all --jvm
	$(OHB) fabric mem --seconds 60
	$(OHB) mem all
	$(OHB) spark all
	$(OHB) mapreduce all
	$(OHB) mapreduce sort
	$(OHB) mapreduce terasort
	$(OHB) rpc lat
	$(OHB) rpc thr
	$(OHB) rpc callbench
	$(OHB) hdfs meta
	$(OHB) hbase
	$(OHB) hdfs all
	$(OHB) hdfs dfsio
	$(OHB) hdfs tiers
	$(OHB) hdfs tiers skew
	$(OHB) hdfs tiers dfsio
	$(OHB) report

clean:
	cd native && $(CARGO) clean
	$(MVN) -f jvm/pom.xml clean
	rm -rf build results
