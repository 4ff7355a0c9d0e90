package cli

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/roostfleet/roost/client"
	"github.com/roostfleet/roost/internal/english"
	"github.com/roostfleet/roost/internal/tlsconfig"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// roostctl user: people with client certificates from the hub CA and a
// role (admin, operator, viewer, auditor), and their revocation.

func newUserCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "user",
		Short: "Manage the people who may use the hub, their roles and revocation",
		Long: `Every person who uses roostctl gets their own client configuration: a
client certificate from the hub CA whose CN is their name and whose role
decides what they may call:

  viewer    reads everything but secrets
  operator  also assigns and unassigns servers, cordons, approves servers,
            pauses and resumes rollouts, promotes images
  admin     everything: tokens, users, members, snapshots, manifests
  auditor   reads, lists users and reads the audit log (roostctl audit)

'roostctl user create' generates the person's key on this machine, has the
hub sign a certificate for it and prints their configuration file. 'roostctl
user revoke' refuses all of a person's certificates on every hub member as
soon as the revocation is applied. 'roostctl auth can-i VERB KIND' tells what
a role may do.`,
		Example: `  roostctl user create jane --role operator --ttl 720h > jane.conf
  roostctl user list
  roostctl user renew jane > jane.conf
  roostctl user revoke jane`,
		Args: unknownSubcommand,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newUserCreateCommand(o), newUserRenewCommand(o), newUserListCommand(o), newUserRevokeCommand(o))
	return cmd
}

// newUserKey generates an ECDSA P-256 key and a CSR for it; the key never
// leaves this machine but in the printed configuration.
func newUserKey(name string) (csrPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: name}}, key)
	if err != nil {
		return nil, nil, err
	}
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk}), nil
}

// userRoleNames are the roles of 'user create --role'.
var userRoleNames = []string{"admin", "operator", "viewer", "auditor"}

// writeUserConfig writes the configuration for a user's new certificate
// to file (mode 0600) or, when file is empty, to standard output.
func (o *options) writeUserConfig(resp *roostv1.CreateUserResponse, keyPEM []byte, file string) error {
	cfg, err := o.loadConfig()
	if err != nil {
		return err
	}
	hubs := o.hubs
	if len(hubs) == 0 {
		hubs = cfg.Hubs
	}
	out := &client.Config{Hubs: hubs, CertificateAuthority: resp.GetCaPem(), ClientCertificate: resp.GetCertificatePem(), ClientKey: string(keyPEM)}
	u := resp.GetUser()
	if file != "" {
		if err := out.Write(file); err != nil {
			return err
		}
		fmt.Fprintf(o.Err, "wrote the configuration of %s (role %s) to %s: give it to them; it holds their private key\n", u.GetName(), tlsconfig.RoleName(u.GetRole()), file)
		return nil
	}
	data, err := out.Marshal()
	if err != nil {
		return err
	}
	_, err = o.Out.Write(data)
	return err
}

func newUserCreateCommand(o *options) *cobra.Command {
	var role, file string
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "create NAME --role ROLE",
		Short: "Create a user and print their client configuration",
		Long: `Create the user NAME (a DNS label: lower-case letters, digits, '-') with a
role and print their client configuration (the format of admin.conf: hub
addresses, the hub CA, their certificate and private key) to standard output,
or write it to --file. The key is generated here and never sent to the hub.
The certificate is valid for --ttl; renew it with 'roostctl user renew'.`,
		Example: `  roostctl user create jane --role operator > jane.conf
  roostctl user create audit-bot --role auditor --ttl 8760h --file audit-bot.conf`,
		Args: exactArgs(1, "a user NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if role == "" {
				return usageErrorf("--role is required: one of %s", strings.Join(userRoleNames, ", "))
			}
			if _, ok := tlsconfig.UserRoles[role]; !ok {
				return usageErrorf("--role %q: use one of %s", role, strings.Join(userRoleNames, ", "))
			}
			csr, key, err := newUserKey(args[0])
			if err != nil {
				return err
			}
			ctx, conn, done, err := o.open(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			resp, err := conn.hub.CreateUser(ctx, &roostv1.CreateUserRequest{Name: args[0], Role: role, TtlSeconds: int64(ttl / time.Second), CsrPem: string(csr)})
			if err != nil {
				return o.wrapCallError(err)
			}
			return o.writeUserConfig(resp, key, file)
		},
	}
	cmd.Flags().StringVar(&role, "role", "", "the user's `ROLE`: admin, operator, viewer or auditor")
	cmd.Flags().DurationVar(&ttl, "ttl", 720*time.Hour, "how long the certificate is valid (e.g. 720h; at most 8784h)")
	cmd.Flags().StringVarP(&file, "file", "f", "", "write the configuration to `FILE` (mode 0600) instead of standard output")
	_ = cmd.RegisterFlagCompletionFunc("role", fixedCompletions(userRoleNames...))
	return cmd
}

func newUserRenewCommand(o *options) *cobra.Command {
	var file string
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "renew NAME",
		Short: "Issue a new certificate for a user and print their configuration",
		Long: `Issue a new certificate (and key) for the user NAME, with their role, and
print their new client configuration, or write it to --file. Their older
certificates stay valid until they expire or the user is revoked.`,
		Example:           `  roostctl user renew jane --file jane.conf`,
		Args:              exactArgs(1, "a user NAME"),
		ValidArgsFunction: o.argCompletions(false, userNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			csr, key, err := newUserKey(args[0])
			if err != nil {
				return err
			}
			ctx, conn, done, err := o.open(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			resp, err := conn.hub.RenewUser(ctx, &roostv1.RenewUserRequest{Name: args[0], TtlSeconds: int64(ttl / time.Second), CsrPem: string(csr)})
			if err != nil {
				return o.wrapCallError(err)
			}
			return o.writeUserConfig(resp, key, file)
		},
	}
	cmd.Flags().DurationVar(&ttl, "ttl", 720*time.Hour, "how long the new certificate is valid (e.g. 720h; at most 8784h)")
	cmd.Flags().StringVarP(&file, "file", "f", "", "write the configuration to `FILE` (mode 0600) instead of standard output")
	return cmd
}

// userJSON is the -o json|yaml form of a user.
type userJSON struct {
	Name         string     `json:"name" yaml:"name"`
	Role         string     `json:"role" yaml:"role"`
	CreatedAt    string     `json:"createdAt,omitempty" yaml:"createdAt,omitempty"`
	RevokedAt    string     `json:"revokedAt,omitempty" yaml:"revokedAt,omitempty"`
	Certificates []certJSON `json:"certificates" yaml:"certificates"`
}

type certJSON struct {
	Serial    string `json:"serial" yaml:"serial"`
	NotBefore string `json:"notBefore" yaml:"notBefore"`
	NotAfter  string `json:"notAfter" yaml:"notAfter"`
}

func userToJSON(u *roostv1.User) userJSON {
	j := userJSON{Name: u.GetName(), Role: tlsconfig.RoleName(u.GetRole()), Certificates: []certJSON{}}
	if u.GetCreatedAt() != nil {
		j.CreatedAt = u.GetCreatedAt().AsTime().UTC().Format(time.RFC3339)
	}
	if u.GetRevokedAt() != nil {
		j.RevokedAt = u.GetRevokedAt().AsTime().UTC().Format(time.RFC3339)
	}
	for _, c := range u.GetCertificates() {
		j.Certificates = append(j.Certificates, certJSON{Serial: c.GetSerial(),
			NotBefore: c.GetNotBefore().AsTime().UTC().Format(time.RFC3339), NotAfter: c.GetNotAfter().AsTime().UTC().Format(time.RFC3339)})
	}
	return j
}

func newUserListCommand(o *options) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the users, their roles and certificates",
		Long: `List the users: NAME, ROLE, CERTIFICATES (how many were issued), EXPIRES
(when the newest one expires) and STATUS (Active, Expired or Revoked). The
bootstrap admin.conf that the first hub member wrote is not a user.`,
		Example: `  roostctl user list
  roostctl user list -o yaml`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkTableOutput(output); err != nil {
				return err
			}
			ctx, conn, done, err := o.open(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			resp, err := conn.hub.ListUsers(ctx, &roostv1.ListUsersRequest{})
			if err != nil {
				return o.wrapCallError(err)
			}
			if output == outJSON || output == outYAML {
				out := []userJSON{}
				for _, u := range resp.GetUsers() {
					out = append(out, userToJSON(u))
				}
				return writeStructured(o.Out, out, output)
			}
			if len(resp.GetUsers()) == 0 {
				fmt.Fprintln(o.Err, "No users: create one with 'roostctl user create NAME --role ROLE'.")
				return nil
			}
			tw := tabwriter.NewWriter(o.Out, 0, 4, 3, ' ', 0)
			fmt.Fprintln(tw, "NAME\tROLE\tCERTIFICATES\tEXPIRES\tSTATUS")
			for _, u := range resp.GetUsers() {
				certs := u.GetCertificates()
				expires, status := "<none>", "Active"
				if len(certs) > 0 {
					last := certs[len(certs)-1].GetNotAfter().AsTime()
					expires = last.UTC().Format(time.RFC3339)
					if o.now().After(last) {
						status = "Expired"
					}
				}
				if u.GetRevokedAt() != nil {
					status = "Revoked"
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", u.GetName(), tlsconfig.RoleName(u.GetRole()), len(certs), expires, status)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", outTable, "output `FORMAT`: table, json or yaml")
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletions(outTable, outJSON, outYAML))
	return cmd
}

func newUserRevokeCommand(o *options) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "revoke NAME...",
		Short: "Revoke users: every hub member refuses all their certificates",
		Long: `Revoke each user NAME: once the revocation is applied (through Raft, at
once on every member), every hub member refuses all of their certificates,
also calls a member forwards. A revoked name stays revoked: create a user
with another name for the person's next role. Revoking a revoked user
succeeds.`,
		Example:           `  roostctl user revoke jane`,
		Args:              minArgs(1, "a user NAME"),
		ValidArgsFunction: o.argCompletions(true, userNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch output {
			case "", outJSON, outYAML:
			default:
				return usageErrorf("--output %q: use json or yaml (or nothing for text)", output)
			}
			ctx, conn, done, err := o.open(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			var failed error
			var out []userJSON
			for _, name := range args {
				resp, err := conn.hub.RevokeUser(ctx, &roostv1.RevokeUserRequest{Name: name})
				if err != nil {
					err = o.wrapCallError(err)
					if !isHubError(err) {
						return err
					}
					printError(o.Err, err)
					if failed == nil {
						failed = reportedError{exitCode(err)}
					}
					continue
				}
				if output != "" {
					out = append(out, userToJSON(resp.GetUser()))
					continue
				}
				fmt.Fprintf(o.Out, "user %s revoked: every hub member refuses their %s\n", name, english.Count(len(resp.GetUser().GetCertificates()), "certificate", "certificates"))
			}
			if output != "" && len(out) > 0 {
				if err := writeStructured(o.Out, out, output); err != nil {
					return err
				}
			}
			return failed
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output `FORMAT`: json or yaml (default: text)")
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletions(outJSON, outYAML))
	return cmd
}
