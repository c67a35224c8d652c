package handlers

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/crypto/bcrypt"

	"transit/messages"
	"transit/store"
)

type orgStore interface {
	CreateOrg(ctx context.Context, cmd store.Cmd, p messages.OrgCreatePayload) (store.Org, error)
	RegisterUser(ctx context.Context, cmd store.Cmd, p messages.UserRegisterPayload, passwordHash string) (store.User, error)
	SuspendUser(ctx context.Context, cmd store.Cmd, p messages.UserSuspendPayload) (store.User, error)
	CreateProject(ctx context.Context, cmd store.Cmd, p messages.ProjectCreatePayload) (store.Project, error)
	UpdateSettings(ctx context.Context, cmd store.Cmd, p messages.SettingsUpdatePayload) (store.ScopeSettings, error)
	StoreSecret(ctx context.Context, cmd store.Cmd, p messages.SecretStorePayload, cipherText string, encrypted bool) (store.Secret, error)
	RefuseSecret(ctx context.Context, cmd store.Cmd, orgID, secretID string, actor messages.Actor, reason string) error
	RotateSecret(ctx context.Context, cmd store.Cmd, p messages.SecretRotatePayload, cipherText string, encrypted bool) (store.Secret, error)
}

// Sealer encrypts a secret for storage (provider.Sealer: KMS envelope
// encryption), bound to the context it is stored under.
type Sealer interface {
	Seal(ctx context.Context, plaintext string, context map[string]string) (string, error)
}

// Org handles the org directory's commands.
type Org struct {
	store orgStore
	// sealer seals secrets; without one, development stores them as
	// sent, marked unencrypted, and anywhere else refuses them.
	sealer      Sealer
	development bool
	now         func() time.Time
}

// NewOrg returns the org handler. sealer may be nil: then a secret is
// stored as sent, marked unencrypted, in development, and refused
// (plaintext_refused) anywhere else.
func NewOrg(st orgStore, sealer Sealer, development bool, now func() time.Time) *Org {
	if st == nil || now == nil {
		panic("handlers: NewOrg needs a store and a clock")
	}
	return &Org{store: st, sealer: sealer, development: development, now: now}
}

// Handle applies one org command.
func (h *Org) Handle(ctx context.Context, cmd messages.Command) ([]messages.Out, error) {
	c := store.CmdOf(cmd, h.now())
	var (
		outs         []messages.Out
		err          error
		orgID, about string
		actor        messages.Actor
	)
	switch p := cmd.Payload.(type) {
	case *messages.OrgCreatePayload:
		orgID, actor = p.OrgID, p.Actor
		outs, err = h.createOrg(ctx, c, p)
	case *messages.UserRegisterPayload:
		orgID, about, actor = p.OrgID, p.UserID, p.Actor
		outs, err = h.register(ctx, c, p)
	case *messages.UserSuspendPayload:
		orgID, about, actor = p.OrgID, p.UserID, p.Actor
		outs, err = h.suspend(ctx, c, p)
	case *messages.ProjectCreatePayload:
		orgID, about, actor = p.OrgID, p.ProjectID, p.Actor
		outs, err = h.createProject(ctx, c, p)
	case *messages.SettingsUpdatePayload:
		orgID, about, actor = p.OrgID, p.Scope+":"+p.UserID+p.ProjectID, p.Actor
		outs, err = h.updateSettings(ctx, c, p)
	case *messages.SecretStorePayload:
		orgID, about, actor = p.OrgID, p.SecretID, p.Actor
		outs, err = h.storeSecret(ctx, c, p)
	case *messages.SecretRotatePayload:
		orgID, about, actor = p.OrgID, p.SecretID, p.Actor
		outs, err = h.rotateSecret(ctx, c, p)
	default:
		return nil, &messages.InvalidError{Field: "type", Reason: fmt.Sprintf("%s has no org handler", cmd.Type)}
	}
	if rej, ok := store.AsRejection(err); ok {
		return one(messages.OrgRejected, rej.At, messages.OrgRejectedPayload{
			Command: cmd.Type, OrgID: orgID, ID: about, Actor: actor, Reason: rej.Reason,
		}), nil
	}
	return outs, err
}

func (h *Org) createOrg(ctx context.Context, c store.Cmd, p *messages.OrgCreatePayload) ([]messages.Out, error) {
	c.Actor = string(p.Actor)
	org, err := h.store.CreateOrg(ctx, c, *p)
	if err != nil {
		return nil, err
	}
	return one(messages.OrgEventCreated, parseISO(org.CreatedAt), messages.OrgCreatedPayload{OrgID: org.OrgID, Name: org.Name, Plan: org.Plan, CreatedAt: org.CreatedAt}), nil
}

func (h *Org) register(ctx context.Context, c store.Cmd, p *messages.UserRegisterPayload) ([]messages.Out, error) {
	c.Actor = string(p.Actor)
	hash, err := bcrypt.GenerateFromPassword([]byte(p.Password), bcrypt.DefaultCost)
	if err != nil {
		return nil, &messages.InvalidError{Command: messages.UserRegister, Field: "password", Reason: err.Error()}
	}
	u, err := h.store.RegisterUser(ctx, c, *p, string(hash))
	if err != nil {
		return nil, err
	}
	return one(messages.UserRegistered, parseISO(u.CreatedAt), messages.UserRegisteredPayload{
		OrgID: u.OrgID, UserID: u.UserID, Email: u.Email, DisplayName: u.DisplayName, Role: u.Role, CreatedAt: u.CreatedAt,
	}), nil
}

func (h *Org) suspend(ctx context.Context, c store.Cmd, p *messages.UserSuspendPayload) ([]messages.Out, error) {
	c.Actor = string(p.Actor)
	u, err := h.store.SuspendUser(ctx, c, *p)
	if err != nil {
		return nil, err
	}
	return one(messages.UserSuspended, parseISO(u.SuspendedAt), messages.UserSuspendedPayload{OrgID: u.OrgID, UserID: u.UserID, By: p.Actor}), nil
}

func (h *Org) createProject(ctx context.Context, c store.Cmd, p *messages.ProjectCreatePayload) ([]messages.Out, error) {
	c.Actor = string(p.Actor)
	pr, err := h.store.CreateProject(ctx, c, *p)
	if err != nil {
		return nil, err
	}
	return one(messages.ProjectCreated, parseISO(pr.CreatedAt), messages.ProjectCreatedPayload{OrgID: pr.OrgID, ProjectID: pr.ProjectID, Name: pr.Name,
		LocalPathHint: pr.LocalPathHint, DefaultModel: pr.DefaultModel, CreatedAt: pr.CreatedAt}), nil
}

func (h *Org) updateSettings(ctx context.Context, c store.Cmd, p *messages.SettingsUpdatePayload) ([]messages.Out, error) {
	c.Actor = string(p.Actor)
	set, err := h.store.UpdateSettings(ctx, c, *p)
	if err != nil {
		return nil, err
	}
	return one(messages.SettingsUpdated, parseISO(set.UpdatedAt), messages.SettingsUpdatedPayload{OrgID: p.OrgID, Scope: set.Scope, UserID: p.UserID,
		ProjectID: p.ProjectID, DefaultModel: set.DefaultModel, ModelAllowList: set.ModelAllowList, UpdatedAt: set.UpdatedAt}), nil
}

func (h *Org) storeSecret(ctx context.Context, c store.Cmd, p *messages.SecretStorePayload) ([]messages.Out, error) {
	return h.writeSecret(ctx, c, p.OrgID, p.SecretID, p.Actor, p.Value, messages.SecretStored, func(sealed string, encrypted bool) (store.Secret, error) {
		return h.store.StoreSecret(ctx, c, *p, sealed, encrypted)
	})
}

func (h *Org) rotateSecret(ctx context.Context, c store.Cmd, p *messages.SecretRotatePayload) ([]messages.Out, error) {
	return h.writeSecret(ctx, c, p.OrgID, p.SecretID, p.Actor, p.Value, messages.SecretRotated, func(sealed string, encrypted bool) (store.Secret, error) {
		return h.store.RotateSecret(ctx, c, *p, sealed, encrypted)
	})
}

// writeSecret seals value and writes it; unsealed (no KMS key), it is
// written only in development and refused anywhere else.
func (h *Org) writeSecret(ctx context.Context, c store.Cmd, orgID, secretID string, actor messages.Actor, value string, event messages.Type,
	write func(sealed string, encrypted bool) (store.Secret, error)) ([]messages.Out, error) {
	c.Actor = string(actor)
	sealed, encrypted, err := h.seal(ctx, orgID, secretID, value)
	if err != nil {
		return nil, err
	}
	if !encrypted && !h.development {
		return nil, h.store.RefuseSecret(ctx, c, orgID, secretID, actor, messages.ReasonPlaintextRefused)
	}
	sec, err := write(sealed, encrypted)
	if err != nil {
		return nil, err
	}
	return one(event, parseISO(sec.UpdatedAt), messages.SecretStoredPayload{OrgID: orgID, SecretID: sec.SecretID, SecretType: sec.Type,
		Encrypted: sec.Encrypted, UpdatedAt: sec.UpdatedAt}), nil
}

// seal encrypts a secret bound to its org and ID, or, where no sealer is
// configured, keeps it as sent (encrypted false).
func (h *Org) seal(ctx context.Context, orgID, secretID, value string) (string, bool, error) {
	if h.sealer == nil {
		return value, false, nil
	}
	sealed, err := h.sealer.Seal(ctx, value, map[string]string{"org_id": orgID, "secret_id": secretID})
	if err != nil {
		return "", false, fmt.Errorf("seal secret %s of %s: %w", secretID, orgID, err)
	}
	return sealed, true, nil
}

// parseISO is a time the store recorded (store.Instant's form): events
// carry it, so a redelivery that replays the outcome emits the same
// message. One the store wrote itself always parses.
func parseISO(s string) time.Time {
	t, _ := time.Parse(time.RFC3339, s)
	return t
}
