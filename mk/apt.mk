# $(call apt_install,pkg1 pkg2 ...): installs the Debian packages that are missing (CI and fresh
# machines run as root; nothing is done when everything is already there). A package counts as
# present only when dpkg says "install ok installed" (a removed one keeps its config files and
# would otherwise look present to `dpkg -s`).
define apt_install
	@missing=""; for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi
endef
